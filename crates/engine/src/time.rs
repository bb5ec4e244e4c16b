//! Time: the local clock ([`now_ns`], and [`WallClock`] for a cheap
//! reading of it) and times written by people ([`parse_time`]). Logic never
//! reads a clock: the edges read one here and pass the time in, in ns since
//! the Unix epoch.

pub use tickguard_reader::clock::{now_ns, WallClock};

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses a time for `--at`: ns since the Unix epoch, or UTC as
/// `YYYY-MM-DDTHH:MM:SS[.fraction][Z]` (up to 9 fractional digits).
pub fn parse_time(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<u64>()
            .map_err(|_| format!("'{s}' is too large for ns since the Unix epoch"));
    }
    let bad = || {
        format!(
            "'{s}' is neither ns since the Unix epoch nor a UTC time like 2026-01-05T09:00:02.5Z"
        )
    };
    let t = s.strip_suffix('Z').unwrap_or(s);
    let (date, time) = t.split_once(['T', ' ']).ok_or_else(bad)?;
    let num = |x: &str, len: usize| -> Result<u32, String> {
        if x.len() == len && x.bytes().all(|b| b.is_ascii_digit()) {
            x.parse::<u32>().map_err(|_| bad())
        } else {
            Err(bad())
        }
    };
    let mut dp = date.split('-');
    let (y, mo, d) = match (dp.next(), dp.next(), dp.next(), dp.next()) {
        (Some(y), Some(m), Some(d), None) => (num(y, 4)?, num(m, 2)?, num(d, 2)?),
        _ => return Err(bad()),
    };
    let (hms, frac) = match time.split_once('.') {
        Some((h, f)) => (h, Some(f)),
        None => (time, None),
    };
    let mut tp = hms.split(':');
    let (h, mi, se) = match (tp.next(), tp.next(), tp.next(), tp.next()) {
        (Some(h), Some(m), Some(s), None) => (num(h, 2)?, num(m, 2)?, num(s, 2)?),
        _ => return Err(bad()),
    };
    let days_in_month = match mo {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        _ => return Err(bad()),
    };
    if d == 0 || d > days_in_month || h > 23 || mi > 59 || se > 59 {
        return Err(bad());
    }
    let out_of_range =
        || format!("'{s}' is out of range: 1970-01-01T00:00:00Z to 2554-07-21T23:34:33.709551615Z");
    let nanos = match frac {
        None => 0,
        Some(f) if !f.is_empty() && f.len() <= 9 && f.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{f:0<9}").parse::<u64>().map_err(|_| bad())?
        }
        Some(_) => return Err(bad()),
    };
    // Well formed, but before the epoch.
    if y < 1970 {
        return Err(out_of_range());
    }
    let days = days_from_civil(i64::from(y), mo, d) as u64;
    let secs = days * 86_400 + u64::from(h) * 3600 + u64::from(mi) * 60 + u64::from(se);
    secs.checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(nanos))
        .ok_or_else(out_of_range)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ns_and_utc() {
        let t = 1_767_603_601_234_567_890;
        assert_eq!(parse_time("1767603601234567890"), Ok(t));
        assert_eq!(parse_time("2026-01-05T09:00:01.234567890Z"), Ok(t));
        assert_eq!(
            parse_time("2026-01-05T09:00:01.5Z"),
            Ok(1_767_603_601_500_000_000)
        );
        assert_eq!(
            parse_time("2026-01-05 09:00:01"),
            Ok(1_767_603_601_000_000_000)
        );
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(
            parse_time("2024-02-29T23:59:59Z"),
            Ok(1_709_251_199_000_000_000)
        );
        for bad in [
            "",
            "x",
            "2026-02-30T00:00:00Z",
            "2026-01-05T24:00:00Z",
            "2026-01-05T09:00:01.1234567891Z",
            "2026-1-05T09:00:01Z",
            "99999999999999999999",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
        // Well formed but outside u64 ns since the epoch: said so.
        assert_eq!(parse_time("2554-07-21T23:34:33.709551615Z"), Ok(u64::MAX));
        assert!(!parse_time("1969-12-31T23:59:59.xZ")
            .unwrap_err()
            .contains("out of range"));
        for far in [
            "1969-12-31T23:59:59Z",
            "2554-07-21T23:34:34Z",
            "9999-12-31T23:59:59Z",
        ] {
            let e = parse_time(far).unwrap_err();
            assert!(e.contains("is out of range"), "{far}: {e}");
        }
    }
}
