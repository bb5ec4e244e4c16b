//! Time: the local clock ([`now_ns`], and [`WallClock`] for a cheap
//! reading of it) and times written by people ([`parse_time`]). Logic never
//! reads a clock: the edges read one here and pass the time in, in ns since
//! the Unix epoch.

pub use tickguard_reader::clock::{now_ns, WallClock};

/// Whether a retry set for `at`, `period` ns after a failure (local clock,
/// ns), is due at `now`: at or after `at`, or with the clock stepped back
/// to before the failure, which would otherwise hold it back by the whole
/// step. `u64::MAX` is never due.
pub fn retry_due(now: u64, at: u64, period: u64) -> bool {
    at != u64::MAX && (now >= at || at - now > period)
}

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

/// Parses a time for `--at`: ns since the Unix epoch, or a calendar time
/// `YYYY-MM-DDTHH:MM:SS[.fraction]` (up to 9 fractional digits) followed by
/// its zone: `Z` for UTC or an offset `+HH:MM` / `-HH:MM`. A calendar time
/// without a zone is refused: read as UTC it would put an operator's
/// local 09:30 hours away from the incident, without a word.
pub fn parse_time(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<u64>()
            .map_err(|_| format!("'{s}' is too large for ns since the Unix epoch"));
    }
    let bad = || {
        format!(
            "'{s}' is neither ns since the Unix epoch nor a time with its zone like 2026-01-05T09:00:02.5Z or 2026-01-05T04:00:02.5-05:00"
        )
    };
    let (date, time) = s.split_once(['T', ' ']).ok_or_else(bad)?;
    // The zone: seconds east of UTC; `None` when none is written (said so
    // once the rest is found well formed).
    let (time, east) = if let Some(t) = time.strip_suffix('Z') {
        (t, Some(0))
    } else {
        // (Split only where a character starts: any text may come here.)
        let at = time
            .len()
            .checked_sub(6)
            .filter(|&at| time.is_char_boundary(at));
        match at.map(|at| (&time[..at], <[u8; 6]>::try_from(&time.as_bytes()[at..]))) {
            Some((t, Ok([sign @ (b'+' | b'-'), h1, h2, b':', m1, m2]))) => {
                let hh = digits(h1, h2).ok_or_else(bad)?;
                let mm = digits(m1, m2).ok_or_else(bad)?;
                if hh > 23 || mm > 59 {
                    return Err(bad());
                }
                let east = i64::from(hh * 3600 + mm * 60);
                (t, Some(if sign == b'-' { -east } else { east }))
            }
            _ => (time, None),
        }
    };
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
    let Some(east) = east else {
        return Err(format!(
            "'{s}' has no time zone: add Z for UTC, or the offset of the time written, like -05:00"
        ));
    };
    let days = days_from_civil(i64::from(y), mo, d);
    let secs = days * 86_400 + i64::from(h * 3600 + mi * 60 + se) - east;
    u64::try_from(secs)
        .ok()
        .and_then(|secs| secs.checked_mul(1_000_000_000))
        .and_then(|n| n.checked_add(nanos))
        .ok_or_else(out_of_range)
}

/// The value of two ASCII digits.
fn digits(a: u8, b: u8) -> Option<u32> {
    (a.is_ascii_digit() && b.is_ascii_digit())
        .then(|| u32::from(a - b'0') * 10 + u32::from(b - b'0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_is_due_at_its_time_or_after_the_clock_stepped_back() {
        let (failed, period) = (10_000, 1_000);
        let at = failed + period;
        assert!(!retry_due(at - 1, at, period));
        assert!(retry_due(at, at, period));
        assert!(!retry_due(failed, at, period), "just failed");
        assert!(
            retry_due(failed - 1, at, period),
            "stepped back before the failure"
        );
        assert!(!retry_due(0, u64::MAX, period), "never");
        assert!(!retry_due(u64::MAX - 1, u64::MAX, period), "never");
    }

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
            parse_time("2026-01-05 09:00:01Z"),
            Ok(1_767_603_601_000_000_000)
        );
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Ok(0));
        // An offset: the same instant written in New York and in Tokyo.
        assert_eq!(
            parse_time("2026-01-05T04:00:01.5-05:00"),
            Ok(1_767_603_601_500_000_000)
        );
        assert_eq!(
            parse_time("2026-01-05T18:30:01+09:30"),
            Ok(1_767_603_601_000_000_000)
        );
        assert_eq!(parse_time("1970-01-01T01:00:00+01:00"), Ok(0));
        assert_eq!(parse_time("1969-12-31T23:00:00-01:00"), Ok(0));
        // Any text: an error, never a panic.
        assert!(parse_time("2026-01-05T09:00:0é:00").is_err());
        assert!(parse_time("2026-01-05T09:00:01+0é:0").is_err());
        // No zone: refused, saying what to add; anything else malformed is
        // not called zoneless.
        for malformed in [
            "2026-01-05Tgarbage",
            "2026-01-05T09",
            "2026-01-05T09:00:01-0500",
        ] {
            let e = parse_time(malformed).unwrap_err();
            assert!(
                e.contains("is neither") && e.contains("-05:00"),
                "{malformed}: {e}"
            );
        }
        // No zone: refused, saying what to add.
        let e = parse_time("2026-01-05T09:00:01").unwrap_err();
        assert!(e.contains("has no time zone") && e.contains("Z"), "{e}");
        assert!(parse_time("2026-01-05 09:00:01.25")
            .unwrap_err()
            .contains("no time zone"));
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
            "2026-01-05T09:00:01+24:00",
            "2026-01-05T09:00:01-05:60",
            "2026-01-05T09:00:01+5:000",
            "2026-01-05T09:00:01-0500",
            "2026-01-05T09:00:01+05:00Z",
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
            "1970-01-01T00:59:59+01:00",
            "2554-07-21T23:34:34Z",
            "9999-12-31T23:59:59Z",
        ] {
            let e = parse_time(far).unwrap_err();
            assert!(e.contains("is out of range"), "{far}: {e}");
        }
    }
}
