//! # turnstone-backoff
//!
//! The one exponential backoff of every reconnect and retry loop (queue consumers and
//! subscribers, the bridge's node calls, MCP reconnects, the console's cluster
//! subscription): a delay that starts at `base`, is multiplied by `factor` (2 unless told)
//! per attempt up to `cap`, optionally jittered, and goes back to `base` on [`Backoff::reset`].
//!
//! A crate of its own because its users sit side by side in the crate graph (`queue`,
//! `mcp`, `bridge`, `console`) with no common lower crate but `proto`, the wire contract,
//! where a sleep schedule does not belong. It knows nothing but [`Duration`]: callers do
//! their own sleeping (`tokio::time::sleep(backoff.delay())`).

use std::time::Duration;

use rand::Rng;

/// An exponential backoff: delay `n` (0-based) is `min(base * factor^n, cap)`.
///
/// With jitter (the default of [`Backoff::new`], so a fleet of processes does not reconnect
/// in step) each delay is drawn uniformly from `[d/2, d]` at millisecond resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    factor: u32,
    cap: Duration,
    jitter: bool,
    /// Delays handed out since the last reset.
    attempt: u32,
}

impl Backoff {
    /// `base` doubling to `cap`, jittered.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self {
            base,
            factor: 2,
            cap,
            jitter: true,
            attempt: 0,
        }
    }

    /// The same schedule with another growth factor (at least 1).
    #[must_use]
    pub fn factor(mut self, factor: u32) -> Self {
        self.factor = factor.max(1);
        self
    }

    /// The same schedule without jitter: every delay is exactly [`Backoff::nth`].
    #[must_use]
    pub fn without_jitter(mut self) -> Self {
        self.jitter = false;
        self
    }

    /// The un-jittered delay number `n` (0-based): `min(base * factor^n, cap)`.
    pub fn nth(&self, n: u32) -> Duration {
        self.factor
            .checked_pow(n)
            .and_then(|f| self.base.checked_mul(f))
            .map_or(self.cap, |d| d.min(self.cap))
    }

    /// The next delay to sleep; the one after it is longer (until the cap).
    pub fn delay(&mut self) -> Duration {
        let d = self.nth(self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        if !self.jitter {
            return d;
        }
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let lo = ms / 2;
        let hi = ms.max(lo + 1);
        Duration::from_millis(rand::rng().random_range(lo..=hi))
    }

    /// Back to the shortest delay (after a success).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

impl Default for Backoff {
    /// 50 ms doubling to 5 s, jittered: the reconnect loops' default.
    fn default() -> Self {
        Self::new(Duration::from_millis(50), Duration::from_secs(5))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn grows_by_the_factor_to_the_cap() {
        let mut b = Backoff::new(ms(100), ms(800)).without_jitter();
        let d: Vec<Duration> = (0..6).map(|_| b.delay()).collect();
        assert_eq!(d, [ms(100), ms(200), ms(400), ms(800), ms(800), ms(800)]);
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60))
            .factor(3)
            .without_jitter();
        let d: Vec<u64> = (0..6).map(|_| b.delay().as_secs()).collect();
        assert_eq!(d, [1, 3, 9, 27, 60, 60]);
    }

    #[test]
    fn jitter_stays_within_half_to_whole() {
        let mut b = Backoff::new(ms(100), ms(800));
        let d: Vec<u128> = (0..6).map(|_| b.delay().as_millis()).collect();
        assert!((50..=100).contains(&d[0]), "{d:?}");
        assert!((100..=200).contains(&d[1]), "{d:?}");
        assert!((400..=800).contains(&d[5]), "{d:?}");
        // A zero base still yields a (tiny) delay rather than panicking on an empty range.
        assert!(Backoff::new(Duration::ZERO, ms(10)).delay() <= ms(1));
    }

    #[test]
    fn reset_goes_back_to_the_base() {
        let mut b = Backoff::new(ms(100), ms(800)).without_jitter();
        for _ in 0..5 {
            b.delay();
        }
        b.reset();
        assert_eq!(b.delay(), ms(100));
        let mut j = Backoff::new(ms(100), ms(800));
        for _ in 0..5 {
            j.delay();
        }
        j.reset();
        assert!((50..=100).contains(&j.delay().as_millis()));
    }

    #[test]
    fn nth_never_overflows_and_a_factor_of_zero_means_one() {
        let b = Backoff::new(Duration::from_secs(30), Duration::from_secs(60)).without_jitter();
        assert_eq!(b.nth(0), Duration::from_secs(30));
        assert_eq!(b.nth(1), Duration::from_secs(60));
        assert_eq!(b.nth(u32::MAX), Duration::from_secs(60));
        let flat = Backoff::new(ms(7), ms(100)).factor(0).without_jitter();
        assert_eq!(flat.nth(10), ms(7));
        let d = Backoff::default();
        assert_eq!((d.nth(0), d.nth(20)), (ms(50), Duration::from_secs(5)));
    }
}
