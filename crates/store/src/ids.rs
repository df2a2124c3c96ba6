//! Identifier generation: 32-hex workstream ids and dashed UUIDv4 memory ids.

use rand::RngCore;

fn random_bytes() -> [u8; 16] {
    let mut b = [0u8; 16];
    rand::rng().fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40; // version 4
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
    b
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new workstream id: 32 lowercase hex characters (a UUIDv4 without dashes).
pub fn new_ws_id() -> String {
    hex(&random_bytes())
}

/// A new UUIDv4 with dashes, as the original uses for memory ids.
pub fn new_uuid() -> String {
    let h = hex(&random_bytes());
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let ws = new_ws_id();
        assert_eq!(ws.len(), 32);
        assert!(ws.chars().all(|c| c.is_ascii_hexdigit()));
        let u = new_uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(u.as_bytes()[14], b'4');
        assert_ne!(new_ws_id(), ws);
    }
}
