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
    /// A valid symbol for filling arrays before use ("?").
    pub const PLACEHOLDER: Symbol = Symbol(u64::from_le_bytes(*b"?       "));

    /// Validates 8 wire bytes: printable ASCII (`0x21..=0x7E`) right-padded
    /// with spaces, at least one non-space byte, no space before a non-space.
    #[inline]
    pub fn from_wire(bytes: [u8; SYMBOL_LEN]) -> Option<Symbol> {
        // All eight bytes at once (SWAR), with no branch per byte.
        const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
        const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
        let x = u64::from_le_bytes(bytes);
        // Any byte below 0x20 (control) or above 0x7e (DEL, non-ASCII)?
        let below = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
        let above = (x.wrapping_add(ONES) | x) & HIGH;
        // High bit of each byte that is not a space (exact per byte: no
        // carry crosses bytes because the low seven bits are added to 0x7f).
        let y = x ^ (ONES * 0x20);
        let non_space = (((y & !HIGH) + !HIGH) | y) & HIGH;
        // Non-space bytes must be a non-empty prefix: bytes 0..k set, the rest spaces.
        let fill = (non_space >> 7) * 0xff;
        let prefix = fill != 0 && fill & fill.wrapping_add(1) == 0;
        (below | above == 0 && prefix).then_some(Symbol(x))
    }

    /// Builds a symbol from wire bytes the caller has already validated with
    /// [`Symbol::from_wire`] (the decoder checks whole packets first).
    #[inline]
    pub fn from_checked(bytes: [u8; SYMBOL_LEN]) -> Symbol {
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

    /// The branch-free check against the rule read byte by byte, on every
    /// byte value in every position and on random words.
    #[test]
    fn swar_matches_bytewise_rule() {
        fn rule(b: [u8; 8]) -> bool {
            let n = b.iter().position(|&c| c == b' ').unwrap_or(8);
            n > 0
                && b[..n].iter().all(|c| (0x21..=0x7e).contains(c))
                && b[n..].iter().all(|&c| c == b' ')
        }
        let mut cases = vec![];
        for pos in 0..8 {
            for v in 0..=255u8 {
                for base in [*b"ABCDEFGH", *b"ABC     ", *b"A       "] {
                    let mut b = base;
                    b[pos] = v;
                    cases.push(b);
                }
            }
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut b = x.to_le_bytes();
            // Bias towards printable and spaces so valid cases are common.
            for c in b.iter_mut() {
                *c = match *c % 4 {
                    0 => b' ',
                    1 => *c,
                    _ => 0x21 + *c % 0x5e,
                };
            }
            cases.push(b);
        }
        for b in cases {
            assert_eq!(Symbol::from_wire(b).is_some(), rule(b), "{b:?}");
        }
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
