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

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(mantissa: i64, exponent: i8) -> String {
        Price::Decimal { mantissa, exponent }.to_string()
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
