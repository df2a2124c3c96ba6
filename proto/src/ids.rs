//! Identifiers and timestamps as the wire spells them (cluster spec §1.1, node spec §1.3).
//!
//! The one place ids are made. One length per kind, all lowercase hex:
//!
//! | id | length | where |
//! |---|---|---|
//! | `correlation_id` (MQ messages, sends, turns) | 12 ([`SHORT_ID_LEN`]) | the original takes the head of a uuid4 |
//! | approval / plan-review `request_id` | 12 ([`SHORT_ID_LEN`]) | cluster spec §1.1 ("approval `request_id`: 12 hex chars") |
//! | `ws_id` | 32 ([`WS_ID_LEN`]) | a uuid4 without dashes (node spec §1.3.11) |
//! | approval round `cycle_id` | 16 ([`CYCLE_ID_LEN`]) | ours (seed 000 "Phase 2"); longer than a `request_id`, so the two never look alike |
//!
//! The engine re-exports these (`turnstone_engine::new_request_id` and friends); until
//! issue 19 it made its own 16-digit request ids.

use std::time::{SystemTime, UNIX_EPOCH};

/// Length of a `correlation_id` / approval `request_id`: 12 lowercase hex digits.
pub const SHORT_ID_LEN: usize = 12;

/// Length of a workstream id: 32 lowercase hex digits.
pub const WS_ID_LEN: usize = 32;

/// `len` random lowercase hex digits.
pub fn random_hex(len: usize) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(len + 16);
    while out.len() < len {
        let _ = write!(out, "{:016x}", rand::random::<u64>());
    }
    out.truncate(len);
    out
}

/// A fresh `correlation_id`: 12 random lowercase hex digits (48 bits), the
/// shape the original takes from the head of a uuid4 (cluster spec §1.1).
pub fn new_correlation_id() -> String {
    random_hex(SHORT_ID_LEN)
}

/// A fresh approval / plan-review `request_id`; same shape as a correlation id
/// (cluster spec §1.1, §3.7).
pub fn new_request_id() -> String {
    random_hex(SHORT_ID_LEN)
}

/// Length of an approval round's `cycle_id`: 16 lowercase hex digits.
pub const CYCLE_ID_LEN: usize = 16;

/// A fresh approval round `cycle_id`: 16 random lowercase hex digits.
pub fn new_cycle_id() -> String {
    random_hex(CYCLE_ID_LEN)
}

/// A fresh workstream id: 32 random lowercase hex digits.
pub fn new_ws_id() -> String {
    random_hex(WS_ID_LEN)
}

/// Whether `s` looks like a generated short id (12 lowercase hex digits).
pub fn is_short_id(s: &str) -> bool {
    s.len() == SHORT_ID_LEN && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Wall-clock now as Unix epoch seconds, the wire's `timestamp` (cluster spec §1.1).
/// A clock before 1970 yields `0.0`.
pub fn now_timestamp() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn correlation_ids_are_twelve_hex_digits_and_vary() {
        let ids: Vec<String> = (0..64).map(|_| new_correlation_id()).collect();
        assert!(ids.iter().all(|id| is_short_id(id)), "{ids:?}");
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert!(distinct.len() > 60);
    }

    #[test]
    fn every_kind_has_its_one_length() {
        assert!(is_short_id(&new_request_id()));
        let ws = new_ws_id();
        assert_eq!(ws.len(), WS_ID_LEN);
        assert!(
            ws.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(random_hex(0), "");
        assert_eq!(random_hex(40).len(), 40);
    }

    #[test]
    fn short_id_check_rejects_other_shapes() {
        assert!(is_short_id("9082b522c877"));
        assert!(!is_short_id("9082B522C877"));
        assert!(!is_short_id("9082b522c87"));
        assert!(!is_short_id("9082b522c877a"));
        assert!(!is_short_id(""));
    }

    #[test]
    fn timestamp_is_after_2020() {
        assert!(now_timestamp() > 1_577_836_800.0);
    }
}
