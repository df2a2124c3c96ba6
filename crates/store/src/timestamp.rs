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
