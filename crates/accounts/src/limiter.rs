//! The login limiter shared by the node and the console: failed attempts per client
//! address and per (address, username) in a sliding window, reserved before a credential is
//! checked and given back when it succeeds (only failures count); and a bound on concurrent
//! password hashing. 5 failures per (address, username) or 20 per address within 300 s, and
//! the next attempt is `429 {"error": "Too many login attempts"}` with `Retry-After`.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// Failed attempts allowed per key within [`LOGIN_WINDOW`].
pub const LOGIN_MAX_FAILURES: usize = 5;
/// The window of the login limiter.
pub const LOGIN_WINDOW: Duration = Duration::from_secs(300);
/// Keys tracked before expired ones are swept.
const SWEEP_THRESHOLD: usize = 4096;

/// Failed attempts allowed per client address (over all usernames) within [`LOGIN_WINDOW`].
pub const LOGIN_MAX_FAILURES_PER_IP: usize = 20;
/// Password checks (bcrypt) that may run at once; more wait for a slot.
pub const MAX_CONCURRENT_HASHES: usize = 2;
/// How long a login waits for a hashing slot before it is answered 429.
const HASH_SLOT_WAIT: Duration = Duration::from_secs(10);

/// One limiter key and the failures it allows.
pub type LimitKey = (String, usize);

/// The keys of one attempt: the client address (all usernames), and the address with the
/// username (`""` for token logins). There is no key for the username alone, so a stranger
/// cannot lock a user out from elsewhere.
pub fn login_keys(ip: &str, username: &str) -> Vec<LimitKey> {
    vec![
        (format!("ip:{ip}"), LOGIN_MAX_FAILURES_PER_IP),
        (format!("ip-user:{ip}:{username}"), LOGIN_MAX_FAILURES),
    ]
}

/// Login attempts per key within a sliding window. An attempt is reserved atomically before
/// the credential is checked (so parallel attempts cannot all pass the check), and released
/// again when it succeeds: only failures count. Also bounds concurrent password hashing.
#[derive(Debug)]
pub struct LoginLimiter {
    window: Duration,
    attempts: Mutex<HashMap<String, VecDeque<Instant>>>,
    hashing: tokio::sync::Semaphore,
}

impl Default for LoginLimiter {
    fn default() -> Self {
        Self::new(LOGIN_WINDOW)
    }
}

impl LoginLimiter {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            attempts: Mutex::new(HashMap::new()),
            hashing: tokio::sync::Semaphore::new(MAX_CONCURRENT_HASHES),
        }
    }

    /// Reserves one attempt at `now` under every key, or `Err(retry_after)` when any key has
    /// used up its attempts (then nothing is reserved).
    pub fn reserve(&self, keys: &[LimitKey], now: Instant) -> Result<(), Duration> {
        let mut attempts = self.attempts.lock();
        if attempts.len() >= SWEEP_THRESHOLD {
            attempts.retain(|_, times| {
                prune(times, now, self.window);
                !times.is_empty()
            });
        }
        let mut wait: Option<Duration> = None;
        for (key, max) in keys {
            let Some(times) = attempts.get_mut(key) else {
                continue;
            };
            prune(times, now, self.window);
            if times.len() >= *max
                && let Some(oldest) = times.front()
            {
                let left = self.window.saturating_sub(now.duration_since(*oldest));
                wait = Some(wait.map_or(left, |w| w.max(left)));
            }
        }
        if let Some(wait) = wait {
            return Err(wait);
        }
        for (key, _) in keys {
            attempts.entry(key.clone()).or_default().push_back(now);
        }
        Ok(())
    }

    /// Gives back the attempt reserved at `at` (it succeeded).
    pub fn release(&self, keys: &[LimitKey], at: Instant) {
        let mut attempts = self.attempts.lock();
        for (key, _) in keys {
            if let Some(times) = attempts.get_mut(key)
                && let Some(i) = times.iter().position(|t| *t == at)
            {
                times.remove(i);
            }
        }
    }

    /// A slot for one password check, or `None` when none frees up in time.
    pub async fn hashing_slot(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        tokio::time::timeout(HASH_SLOT_WAIT, self.hashing.acquire())
            .await
            .ok()
            .and_then(Result::ok)
    }
}

fn prune(times: &mut VecDeque<Instant>, now: Instant, window: Duration) {
    while times
        .front()
        .is_some_and(|t| now.duration_since(*t) >= window)
    {
        times.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(ip: &str) -> Vec<LimitKey> {
        login_keys(ip, "")
    }

    #[test]
    fn five_failures_block_until_the_oldest_leaves_the_window() {
        let limiter = LoginLimiter::default();
        let t0 = Instant::now();
        let a = keys("10.0.0.1");
        for i in 0..5 {
            assert_eq!(
                limiter.reserve(&a, t0 + Duration::from_secs(i * 10)),
                Ok(()),
                "attempt {i}"
            );
        }
        let now = t0 + Duration::from_secs(60);
        assert_eq!(limiter.reserve(&a, now), Err(Duration::from_secs(240)));
        assert_eq!(
            limiter.reserve(&keys("10.0.0.2"), now),
            Ok(()),
            "per address"
        );
        // The first failure expires at 300 s: one attempt is allowed again.
        let later = t0 + Duration::from_secs(300);
        assert_eq!(limiter.reserve(&a, later), Ok(()));
        assert_eq!(
            limiter.reserve(&a, later),
            Err(Duration::from_secs(10)),
            "the failure at 10 s is now the oldest"
        );
    }

    #[test]
    fn released_attempts_do_not_count() {
        let limiter = LoginLimiter::default();
        let now = Instant::now();
        let a = keys("10.0.0.1");
        for i in 0..20 {
            let at = now + Duration::from_millis(i);
            assert_eq!(limiter.reserve(&a, at), Ok(()));
            limiter.release(&a, at);
        }
        assert_eq!(limiter.reserve(&a, now), Ok(()));
    }

    #[test]
    fn a_username_is_limited_per_address_only() {
        let limiter = LoginLimiter::default();
        let now = Instant::now();
        for _ in 0..5 {
            assert!(limiter.reserve(&login_keys("a", "admin"), now).is_ok());
        }
        assert!(limiter.reserve(&login_keys("a", "admin"), now).is_err());
        assert!(
            limiter.reserve(&login_keys("b", "admin"), now).is_ok(),
            "another address may still try admin"
        );
        assert!(limiter.reserve(&login_keys("a", "other"), now).is_ok());
        // Over all usernames, one address gets 20.
        for i in 0..14 {
            let _ = limiter.reserve(&login_keys("a", &format!("u{i}")), now);
        }
        assert!(limiter.reserve(&login_keys("a", "fresh"), now).is_err());
    }

    #[test]
    fn expired_keys_are_swept() {
        let limiter = LoginLimiter::new(Duration::from_secs(1));
        let t0 = Instant::now();
        for i in 0..SWEEP_THRESHOLD {
            let _ = limiter.reserve(&[(i.to_string(), 5)], t0);
        }
        let _ = limiter.reserve(&keys("late"), t0 + Duration::from_secs(5));
        assert_eq!(limiter.attempts.lock().len(), 2);
    }
}
