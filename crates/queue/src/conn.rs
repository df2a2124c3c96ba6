//! Connection settings and the two kinds of connection Turnstone uses.
//!
//! Ordinary commands go through a [`ConnectionManager`] (multiplexed, reconnects by itself).
//! A blocking pop must not share a multiplexed connection (it would stall every command
//! queued behind it) and needs a response timeout longer than the pop's own timeout — the
//! default 500 ms, or redis-py 8's 5 s, turns an idle `BLPOP … 5` into an error. So blocking
//! loops get a [`blocking_connection`] of their own.

use std::time::Duration;

use rand::Rng;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client, IntoConnectionInfo};

use crate::QueueError;

/// Where Redis is and how to log in: a URL (`redis://`, `rediss://` for TLS), or the
/// original's separate host/port/password/db flags.
#[derive(Debug, Clone, Default)]
pub struct RedisSettings {
    pub url: Option<String>,
    pub host: String,
    pub port: u16,
    pub password: Option<String>,
    pub db: i64,
    pub tls: bool,
}

impl RedisSettings {
    pub fn from_url(url: impl Into<String>) -> Self {
        Self {
            url: Some(url.into()),
            ..Self::default()
        }
    }

    /// The URL these settings name; the password is not included in [`Self::display`].
    pub fn to_url(&self) -> String {
        if let Some(url) = &self.url {
            return url.clone();
        }
        let scheme = if self.tls { "rediss" } else { "redis" };
        let host = if self.host.is_empty() {
            "localhost"
        } else {
            &self.host
        };
        let port = if self.port == 0 { 6379 } else { self.port };
        let auth = match &self.password {
            Some(p) if !p.is_empty() => format!(":{}@", percent_encode(p)),
            _ => String::new(),
        };
        format!("{scheme}://{auth}{host}:{port}/{}", self.db)
    }

    /// The URL without credentials, for logs.
    pub fn display(&self) -> String {
        let url = self.to_url();
        match (url.find("://"), url.rfind('@')) {
            (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
            _ => url,
        }
    }

    pub fn client(&self) -> Result<Client, QueueError> {
        let info = self
            .to_url()
            .as_str()
            .into_connection_info()
            .map_err(|e| QueueError::Settings(format!("{}: {e}", self.display())))?;
        Ok(Client::open(info)?)
    }
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The shared, auto-reconnecting connection for non-blocking commands.
pub async fn manager(client: &Client) -> Result<ConnectionManager, QueueError> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(10)))
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_secs(2))
        .set_number_of_retries(6);
    Ok(client.get_connection_manager_with_config(config).await?)
}

/// A dedicated connection for blocking pops of up to `pop_timeout`: its response timeout is
/// the pop timeout plus a margin, so an idle pop returns nil instead of failing.
pub async fn blocking_connection(
    client: &Client,
    pop_timeout: Duration,
) -> Result<MultiplexedConnection, QueueError> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(pop_timeout + Duration::from_secs(5)));
    Ok(client
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

/// Jittered exponential backoff for reconnect loops: 50 ms doubling to a cap, each delay
/// drawn uniformly from [d/2, d] so a fleet of bridges does not reconnect in step.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    base: Duration,
    cap: Duration,
}

impl Backoff {
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self {
            next: base,
            base,
            cap,
        }
    }

    /// The next delay to sleep.
    pub fn delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.cap);
        let lo = d.as_millis() as u64 / 2;
        let hi = (d.as_millis() as u64).max(lo + 1);
        Duration::from_millis(rand::rng().random_range(lo..=hi))
    }

    /// Back to the shortest delay (after a success).
    pub fn reset(&mut self) {
        self.next = self.base;
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(Duration::from_millis(50), Duration::from_secs(5))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_from_parts_and_redacted_display() {
        let s = RedisSettings {
            host: "h".into(),
            port: 7000,
            password: Some("p@ss word".into()),
            db: 2,
            ..RedisSettings::default()
        };
        assert_eq!(s.to_url(), "redis://:p%40ss%20word@h:7000/2");
        assert_eq!(s.display(), "redis://***@h:7000/2");
        assert!(s.client().is_ok());
        let tls = RedisSettings {
            tls: true,
            ..RedisSettings::default()
        };
        assert_eq!(tls.to_url(), "rediss://localhost:6379/0");
    }

    #[test]
    fn backoff_grows_to_the_cap_with_jitter() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(800));
        let d: Vec<u128> = (0..6).map(|_| b.delay().as_millis()).collect();
        assert!((50..=100).contains(&d[0]), "{d:?}");
        assert!((400..=800).contains(&d[5]), "{d:?}");
        b.reset();
        assert!(b.delay() <= Duration::from_millis(100));
    }

    #[test]
    fn bad_url_is_a_settings_error() {
        let err = RedisSettings::from_url("http://nope").client().unwrap_err();
        assert!(matches!(err, QueueError::Settings(_)), "{err}");
    }
}
