//! Signed node heartbeats: a bridge signs what it writes to `{p}:node:{id}` with the JWT
//! secret the cluster shares, and the console trusts a heartbeat's `server_url` — where it
//! sends user JWTs and its own service tokens — only when the signature holds and is fresh.
//!
//! The signature is HMAC-SHA256 (hex) over `turnstone-heartbeat-v1`, the node id, the
//! server URL and the signing time (Unix seconds), newline-separated. It travels as the
//! extra heartbeat fields `signed_at` and `sig`, which consumers that do not know them
//! ignore.
//!
//! ```
//! use std::time::Duration;
//! use turnstone_runtime::auth::{JwtSecret, heartbeat};
//! let secret = JwtSecret::new("a-shared-secret-of-at-least-32-characters");
//! let sig = heartbeat::sign(&secret, "node-a", "http://10.0.0.5:8080", 1_700_000_000);
//! let check = |sig: &str, now| {
//!     heartbeat::verify(&secret, "node-a", "http://10.0.0.5:8080", Some(1_700_000_000), Some(sig), now, Duration::from_secs(120))
//! };
//! assert_eq!(check(&sig, 1_700_000_030), Ok(()));
//! assert_eq!(check(&sig, 1_700_000_500), Err(heartbeat::Untrusted::Stale));
//! assert_eq!(check("00", 1_700_000_030), Err(heartbeat::Untrusted::BadSignature));
//! ```

use std::time::Duration;

use aws_lc_rs::hmac;

use super::JwtSecret;
use super::tokens::{hex, secrets_equal};

/// Domain separation: a heartbeat signature is never valid as anything else.
const CONTEXT: &str = "turnstone-heartbeat-v1";

/// Why a heartbeat is not trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Untrusted {
    #[error("unsigned heartbeat")]
    Unsigned,
    #[error("bad heartbeat signature")]
    BadSignature,
    #[error("stale heartbeat signature")]
    Stale,
}

/// The hex HMAC-SHA256 of one heartbeat.
pub fn sign(secret: &JwtSecret, node_id: &str, server_url: &str, signed_at: i64) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.expose().as_bytes());
    let input = format!("{CONTEXT}\n{node_id}\n{server_url}\n{signed_at}");
    hex(hmac::sign(&key, input.as_bytes()).as_ref())
}

/// Checks a heartbeat's `signed_at` and `sig` (constant-time) at `now` (Unix seconds):
/// signed by `secret` for exactly this node id and URL, at most `max_age` old (and not more
/// than `max_age` in the future, for clock skew).
pub fn verify(
    secret: &JwtSecret,
    node_id: &str,
    server_url: &str,
    signed_at: Option<i64>,
    sig: Option<&str>,
    now: i64,
    max_age: Duration,
) -> Result<(), Untrusted> {
    let (Some(signed_at), Some(sig)) = (signed_at, sig.filter(|s| !s.is_empty())) else {
        return Err(Untrusted::Unsigned);
    };
    if !secrets_equal(sig, &sign(secret, node_id, server_url, signed_at)) {
        return Err(Untrusted::BadSignature);
    }
    let max_age = i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX);
    if now.saturating_sub(signed_at).abs() > max_age {
        return Err(Untrusted::Stale);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_binds_node_url_and_time() {
        let secret = JwtSecret::new("heartbeat-test-secret-0123456789abcdef");
        let other = JwtSecret::new("another-secret-0123456789abcdef012345");
        let sig = sign(&secret, "n1", "http://127.0.0.1:1", 1000);
        let age = Duration::from_secs(60);
        let ok = |s: &JwtSecret, id: &str, url: &str, at: i64| {
            verify(s, id, url, Some(at), Some(&sig), 1010, age)
        };
        assert_eq!(ok(&secret, "n1", "http://127.0.0.1:1", 1000), Ok(()));
        for bad in [
            ok(&other, "n1", "http://127.0.0.1:1", 1000),
            ok(&secret, "n2", "http://127.0.0.1:1", 1000),
            ok(&secret, "n1", "http://evil:1", 1000),
            ok(&secret, "n1", "http://127.0.0.1:1", 1001),
        ] {
            assert_eq!(bad, Err(Untrusted::BadSignature));
        }
        assert_eq!(
            verify(&secret, "n1", "http://127.0.0.1:1", None, None, 1010, age),
            Err(Untrusted::Unsigned)
        );
        assert_eq!(
            verify(
                &secret,
                "n1",
                "http://127.0.0.1:1",
                Some(1000),
                Some(&sig),
                2000,
                age
            ),
            Err(Untrusted::Stale)
        );
    }
}
