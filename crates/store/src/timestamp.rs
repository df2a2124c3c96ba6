//! Fixed-width ISO-8601 UTC timestamps (`2026-11-30T08:15:05.123456+00:00`).
//!
//! Every timestamp column is text in this one format, so text order is time order on both
//! backends and the values match what the Python original wrote (`datetime.isoformat()`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Now, formatted.
pub fn now() -> String {
    format_system_time(SystemTime::now())
}

/// The instant `days` days ago, formatted (used as a text cut-off).
pub fn days_ago(days: u32) -> String {
    let back = Duration::from_secs(u64::from(days) * 86_400);
    format_system_time(SystemTime::now().checked_sub(back).unwrap_or(UNIX_EPOCH))
}

pub fn format_system_time(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let micros = since.subsec_micros();
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}+00:00",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Parses an ISO-8601 date-time as Python's `isoformat()` and this module write it:
/// `YYYY-MM-DDTHH:MM[:SS[.ffffff]]` with `Z`, `±HH:MM` or no offset (read as UTC); a date
/// alone is midnight UTC. `None` for anything else.
pub fn parse(text: &str) -> Option<SystemTime> {
    let text = text.trim();
    let (date, rest) = match text.find(['T', ' ']) {
        Some(i) => (&text[..i], &text[i + 1..]),
        None => (text, ""),
    };
    let mut parts = date.splitn(3, '-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: u32 = parts.next()?.parse().ok()?;
    let d: u32 = parts.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Offset: the last `Z`, `+` or `-` of the time part.
    let (time, offset_secs) = if let Some(t) = rest.strip_suffix('Z') {
        (t, 0)
    } else if let Some(i) = rest.rfind(['+', '-']) {
        let sign = if rest.as_bytes()[i] == b'-' { -1 } else { 1 };
        let (oh, om) = rest[i + 1..].split_once(':')?;
        let off = oh.parse::<i64>().ok()? * 3600 + om.parse::<i64>().ok()? * 60;
        (&rest[..i], sign * off)
    } else {
        (rest, 0)
    };
    let (mut hh, mut mm, mut ss, mut micros) = (0i64, 0i64, 0i64, 0u32);
    if !time.is_empty() {
        let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
        let mut f = hms.split(':');
        hh = f.next()?.parse().ok()?;
        mm = f.next()?.parse().ok()?;
        ss = f.next().map_or(Some(0), |s| s.parse().ok())?;
        if f.next().is_some() || hh > 23 || mm > 59 || ss > 60 {
            return None;
        }
        if !frac.is_empty() {
            if !frac.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let six: String = frac.chars().chain(std::iter::repeat('0')).take(6).collect();
            micros = six.parse().ok()?;
        }
    }
    let days = days_from_civil(y, m, d);
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss - offset_secs;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(u64::from(micros)))
}

/// The inverse of [`civil_from_days`].
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Howard Hinnant's days-to-civil conversion (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_formats_and_python_isoformat() {
        for t in [
            UNIX_EPOCH,
            UNIX_EPOCH + Duration::from_micros(1_795_000_000_123_456),
        ] {
            assert_eq!(parse(&format_system_time(t)), Some(t));
        }
        let base = parse("2026-11-30T08:15:05+00:00").unwrap();
        assert_eq!(parse("2026-11-30T08:15:05Z"), Some(base));
        assert_eq!(parse("2026-11-30T08:15:05"), Some(base));
        assert_eq!(parse("2026-11-30T10:15:05+02:00"), Some(base));
        assert_eq!(parse("2026-11-30T03:15:05-05:00"), Some(base));
        assert_eq!(
            parse("2026-11-30 08:15:05.5Z"),
            Some(base + Duration::from_millis(500))
        );
        assert_eq!(
            parse("2026-11-30"),
            Some(base - Duration::from_secs(8 * 3600 + 15 * 60 + 5))
        );
        for bad in [
            "",
            "yesterday",
            "2026-13-01",
            "2026-11-30T25:00",
            "2026-11-30T08:15:05.x",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(
            format_system_time(UNIX_EPOCH),
            "1970-01-01T00:00:00.000000+00:00"
        );
        let t = UNIX_EPOCH + Duration::from_micros(1_795_939_200_000_001); // 2026-11-29
        assert_eq!(format_system_time(t), "2026-11-29T08:00:00.000001+00:00");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(format_system_time(leap), "2000-02-29T00:00:00.000000+00:00");
    }

    #[test]
    fn days_ago_sorts_before_now() {
        assert!(days_ago(1) < now());
    }
}
