//! Poll intervals: `30s`, `5m`, `1h`, `1h30m`, `2h 5m 10s` or a bare number of seconds.

/// Seconds in a duration string (see the module docs). An `Err` is a message for the model.
pub fn parse_duration(text: &str) -> Result<f64, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(secs) = s.parse::<f64>() {
        if !secs.is_finite() || secs <= 0.0 {
            return Err(format!(
                "duration must be a positive number of seconds, got {s}"
            ));
        }
        return Ok(secs);
    }
    let invalid = || format!("invalid duration {s:?} (use e.g. 30s, 5m, 1h or 1h30m)");
    let mut total: u64 = 0;
    // Units must come in this order, each at most once.
    let mut allowed: &[char] = &['h', 'm', 's'];
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return Err(invalid());
        }
        let value: u64 = rest[..digits].parse().map_err(|_| invalid())?;
        rest = rest[digits..].trim_start();
        let unit = rest
            .chars()
            .next()
            .map(|c| c.to_ascii_lowercase())
            .ok_or_else(invalid)?;
        let Some(at) = allowed.iter().position(|u| *u == unit) else {
            return Err(invalid());
        };
        allowed = &allowed[at + 1..];
        let factor = match unit {
            'h' => 3600,
            'm' => 60,
            _ => 1,
        };
        total = value
            .checked_mul(factor)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(invalid)?;
        rest = rest[unit.len_utf8()..].trim_start();
    }
    if total == 0 {
        return Err(format!("duration must be positive, got {s:?}"));
    }
    Ok(total as f64)
}

/// A short human form of a number of seconds: `45s`, `5m`, `1h`, `1h30m`.
pub fn format_interval(secs: f64) -> String {
    let secs = secs.max(0.0).round() as u64;
    if secs < 60 {
        return format!("{secs}s");
    }
    if secs < 3600 {
        let (m, s) = (secs / 60, secs % 60);
        return if s == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{s}s")
        };
    }
    let (h, m) = (secs / 3600, (secs % 3600) / 60);
    if m == 0 {
        format!("{h}h")
    } else {
        format!("{h}h{m}m")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        for (text, secs) in [
            ("30s", 30.0),
            ("5m", 300.0),
            ("1h", 3600.0),
            ("1h30m", 5400.0),
            ("2h 5m 10s", 7510.0),
            ("90", 90.0),
            ("12.5", 12.5),
            (" 10S ", 10.0),
            ("24h", 86_400.0),
        ] {
            assert_eq!(parse_duration(text), Ok(secs), "{text}");
        }
        for bad in [
            "",
            "0",
            "-5",
            "5x",
            "m",
            "1m1h",
            "1h1h",
            "0s",
            "nan",
            "inf",
            "5 minutes",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn intervals_format() {
        assert_eq!(format_interval(30.0), "30s");
        assert_eq!(format_interval(300.0), "5m");
        assert_eq!(format_interval(330.0), "5m30s");
        assert_eq!(format_interval(3600.0), "1h");
        assert_eq!(format_interval(5400.0), "1h30m");
    }
}
