//! A published price, exactly as the slot holds it: an `f64` (SQF) or a
//! decimal mantissa with its exponent (exchange feeds: ITCH −4, MDP3 its own).

use std::fmt;

/// A price as published (slot meta `price_format`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Price {
    /// Format 0: the provider's `f64`.
    F64(f64),
    /// Format 1: `mantissa × 10^exponent`, exactly.
    Decimal {
        /// The integer price.
        mantissa: i64,
        /// The power of ten it is scaled by (ITCH: −4).
        exponent: i8,
    },
}

impl Price {
    /// The nearest `f64` (exact for [`Price::F64`]).
    pub fn as_f64(self) -> f64 {
        match self {
            Price::F64(v) => v,
            Price::Decimal { mantissa, exponent } => {
                let scale = 10f64.powi(exponent.unsigned_abs() as i32);
                if exponent < 0 {
                    mantissa as f64 / scale
                } else {
                    mantissa as f64 * scale
                }
            }
        }
    }
}

/// An `f64` as Rust prints it (the shortest text that reads back to the
/// same value); a decimal exactly, without trailing zeros after the point:
/// mantissa 1234500 with exponent −4 prints `123.45`.
impl fmt::Display for Price {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (mantissa, exponent) = match *self {
            Price::F64(v) => return write!(f, "{v}"),
            Price::Decimal { mantissa, exponent } => (mantissa, exponent),
        };
        let digits = mantissa.unsigned_abs().to_string();
        let sign = if mantissa < 0 { "-" } else { "" };
        if exponent >= 0 {
            let zeros = if mantissa == 0 { 0 } else { exponent as usize };
            return write!(f, "{sign}{digits}{:0<zeros$}", "");
        }
        let point = exponent.unsigned_abs() as usize;
        let padded = format!("{digits:0>width$}", width = point + 1);
        let (int, frac) = padded.split_at(padded.len() - point);
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() {
            write!(f, "{sign}{int}")
        } else {
            write!(f, "{sign}{int}.{frac}")
        }
    }
}

impl Price {
    /// [`fixed`](Self::fixed) with the feed's decimals when known, else
    /// the price as it is ([`Display`](fmt::Display)).
    pub fn show(self, places: Option<u8>) -> String {
        places.map_or_else(|| self.to_string(), |p| self.fixed(p))
    }

    /// The price as exact text for machines (JSON): a decimal price as
    /// [`show`](Self::show) prints it (padded, never rounded), an `f64` as
    /// the shortest text that reads back to it (not rounded to `places`).
    pub fn exact(self, places: Option<u8>) -> String {
        match self {
            Price::F64(_) => self.to_string(),
            Price::Decimal { .. } => self.show(places),
        }
    }

    /// The price with the feed's `places` decimals. A decimal price is
    /// exact: zeros are added to reach `places`, and one with more decimals
    /// keeps them all (nothing is rounded): `123.45` with 4 places prints
    /// `123.4500`. An `f64` (a binary approximation of the decimal price the
    /// provider meant) prints rounded to `places`: `1.2710508342804998`
    /// with 5 prints `1.27105`. A feed's prices thus print the same way
    /// everywhere, and align in a column.
    pub fn fixed(self, places: u8) -> String {
        if let Price::F64(v) = self {
            if v.is_finite() {
                return format!("{v:.prec$}", prec = usize::from(places));
            }
        }
        let text = self.to_string();
        if !text
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'.' || b == b'-')
        {
            return text; // NaN, inf or an exponent: as it is.
        }
        let decimals = text.split_once('.').map_or(0, |(_, frac)| frac.len());
        let places = usize::from(places);
        if decimals >= places {
            return text;
        }
        let point = if decimals == 0 { "." } else { "" };
        format!("{text}{point}{:0<width$}", "", width = places - decimals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(mantissa: i64, exponent: i8) -> String {
        Price::Decimal { mantissa, exponent }.to_string()
    }

    #[test]
    fn fixed_places_pad_and_never_round() {
        let d = |m, e| Price::Decimal {
            mantissa: m,
            exponent: e,
        };
        assert_eq!(d(1_234_500, -4).fixed(4), "123.4500");
        assert_eq!(d(1_234_567, -4).fixed(2), "123.4567");
        assert_eq!(d(1_200, 0).fixed(2), "1200.00");
        assert_eq!(d(5, -4).fixed(4), "0.0005");
        assert_eq!(d(-15, -1).fixed(3), "-1.500");
        assert_eq!(d(1_234_500, -4).fixed(0), "123.45");
        assert_eq!(Price::F64(1.1).fixed(5), "1.10000");
        assert_eq!(Price::F64(1.2710508342804998).fixed(5), "1.27105");
        assert_eq!(Price::F64(2.0).fixed(2), "2.00");
        assert_eq!(Price::F64(2.0).fixed(0), "2");
        assert_eq!(Price::F64(f64::NAN).fixed(2), "NaN");
        assert_eq!(Price::F64(f64::INFINITY).fixed(2), "inf");
        assert_eq!(
            Price::F64(1.2710508342804998).exact(Some(5)),
            "1.2710508342804998"
        );
        assert_eq!(d(1_234_500, -4).exact(Some(4)), "123.4500");
        assert_eq!(d(1_234_500, -4).exact(None), "123.45");
    }

    #[test]
    fn decimals_print_exactly() {
        assert_eq!(dec(1_234_500, -4), "123.45");
        assert_eq!(dec(1_230_000, -4), "123");
        assert_eq!(dec(1, -4), "0.0001");
        assert_eq!(dec(-5_000, -4), "-0.5");
        assert_eq!(dec(0, -4), "0");
        assert_eq!(dec(12, 2), "1200");
        assert_eq!(dec(0, 3), "0");
        assert_eq!(dec(7, 0), "7");
        assert_eq!(dec(i64::MIN, -2), "-92233720368547758.08");
        assert_eq!(dec(i64::MAX, -20), "0.09223372036854775807");
        assert_eq!(Price::F64(1.0851).to_string(), "1.0851");
    }

    #[test]
    fn as_f64_scales() {
        let p = Price::Decimal {
            mantissa: 1_234_500,
            exponent: -4,
        };
        assert_eq!(p.as_f64(), 123.45);
        let q = Price::Decimal {
            mantissa: 12,
            exponent: 2,
        };
        assert_eq!(q.as_f64(), 1200.0);
        assert_eq!(Price::F64(-0.25).as_f64(), -0.25);
    }
}
