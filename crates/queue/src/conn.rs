//! Connection settings and the two kinds of connection Turnstone uses.
//!
//! Ordinary commands go through a [`ConnectionManager`] (multiplexed, reconnects by itself).
//! A blocking pop must not share a multiplexed connection (it would stall every command
//! queued behind it) and needs a response timeout longer than the pop's own timeout — the
//! default 500 ms, or redis-py 8's 5 s, turns an idle `BLPOP … 5` into an error. So blocking
//! loops get a [`blocking_connection`] of their own.

use std::path::PathBuf;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client, IntoConnectionInfo};

use crate::QueueError;

/// Where Redis is and how to log in: a URL (`redis://`, `rediss://` for TLS), or the
/// original's separate host/port/password/db flags; plus an ACL user name, and for TLS a CA
/// file (instead of the system roots) and a client certificate and key (mutual TLS). The one
/// place a Redis client is built, for the bridge, the console and the queue client alike.
#[derive(Clone, Default)]
pub struct RedisSettings {
    pub url: Option<String>,
    pub host: String,
    pub port: u16,
    /// ACL user (`AUTH <username> <password>`); wins over one in the URL.
    pub username: Option<String>,
    /// Wins over one in the URL.
    pub password: Option<String>,
    pub db: i64,
    pub tls: bool,
    /// PEM CA bundle that verifies the server (TLS; default: the system roots).
    pub tls_ca_file: Option<PathBuf>,
    /// PEM client certificate and key (mutual TLS; both or neither).
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
}

impl std::fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSettings")
            .field("url", &self.display())
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("tls_ca_file", &self.tls_ca_file)
            .field("tls_cert_file", &self.tls_cert_file)
            .field("tls_key_file", &self.tls_key_file)
            .finish()
    }
}

impl RedisSettings {
    pub fn from_url(url: impl Into<String>) -> Self {
        Self {
            url: Some(url.into()),
            ..Self::default()
        }
    }

    /// The URL these settings name (without the separate username/password, which
    /// [`client`](Self::client) applies); [`Self::display`] hides credentials.
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
        format!("{scheme}://{host}:{port}/{}", self.db)
    }

    /// The URL without credentials, for logs. Text that is no Redis URL is not shown at
    /// all (it may be a secret given in the wrong place).
    pub fn display(&self) -> String {
        let url = self.to_url();
        if !["redis://", "rediss://", "unix://", "redis+unix://"]
            .iter()
            .any(|scheme| url.starts_with(scheme))
        {
            return "<not a redis:// URL>".into();
        }
        match (url.find("://"), url.rfind('@')) {
            (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
            _ => url,
        }
    }

    /// Whether the connection is TLS (`rediss://` or `--redis-tls`).
    pub fn is_tls(&self) -> bool {
        self.tls || self.to_url().starts_with("rediss://")
    }

    /// Checks the settings without connecting: the URL parses, TLS files are readable and
    /// used only with TLS, a client certificate comes with its key.
    pub fn validate(&self) -> Result<(), QueueError> {
        self.client().map(|_| ())
    }

    pub fn client(&self) -> Result<Client, QueueError> {
        let bad = |what: String| QueueError::Settings(format!("{}: {what}", self.display()));
        let mut info = self
            .to_url()
            .as_str()
            .into_connection_info()
            .map_err(|e| bad(e.to_string()))?;
        let mut redis = info.redis_settings().clone();
        if let Some(user) = self.username.as_deref().filter(|u| !u.is_empty()) {
            redis = redis.set_username(user);
        }
        if let Some(password) = self.password.as_deref().filter(|p| !p.is_empty()) {
            redis = redis.set_password(password);
        }
        info = info.set_redis_settings(redis);
        let tls_files = self.tls_ca_file.is_some()
            || self.tls_cert_file.is_some()
            || self.tls_key_file.is_some();
        if tls_files && !self.is_tls() {
            return Err(bad(
                "TLS CA/client certificate files need a rediss:// URL (or --redis-tls)".into(),
            ));
        }
        let read = |what: &str, path: &PathBuf| {
            std::fs::read(path)
                .map_err(|e| bad(format!("cannot read {what} {}: {e}", path.display())))
        };
        let client_tls = match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: read("TLS client certificate", cert)?,
                client_key: read("TLS client key", key)?,
            }),
            (None, None) => None,
            _ => {
                return Err(bad(
                    "a TLS client certificate needs its key and a key its certificate".into(),
                ));
            }
        };
        let root_cert = self
            .tls_ca_file
            .as_ref()
            .map(|ca| read("TLS CA file", ca))
            .transpose()?;
        if !tls_files {
            return Ok(Client::open(info)?);
        }
        Ok(Client::build_with_tls(
            info,
            redis::TlsCertificates {
                client_tls,
                root_cert,
            },
        )?)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_from_parts_and_redacted_display() {
        let s = RedisSettings {
            host: "h".into(),
            port: 7000,
            username: Some("app".into()),
            password: Some("p@ss word".into()),
            db: 2,
            ..RedisSettings::default()
        };
        assert_eq!(s.to_url(), "redis://h:7000/2");
        assert!(!format!("{s:?}").contains("p@ss"));
        let client = s.client().unwrap();
        let redis = client.get_connection_info().redis_settings();
        assert_eq!(redis.username(), Some("app"));
        assert_eq!(redis.password(), Some("p@ss word"));
        let url = RedisSettings::from_url("redis://:pw@h:1/0");
        assert_eq!(url.display(), "redis://***@h:1/0");
        let tls = RedisSettings {
            tls: true,
            ..RedisSettings::default()
        };
        assert_eq!(tls.to_url(), "rediss://localhost:6379/0");
    }

    #[test]
    fn tls_files_need_tls_and_are_read_at_build() {
        let plain = RedisSettings {
            tls_ca_file: Some("/dev/null".into()),
            ..RedisSettings::default()
        };
        let err = plain.client().unwrap_err().to_string();
        assert!(err.contains("rediss://"), "{err}");
        let missing = RedisSettings {
            tls: true,
            tls_ca_file: Some("/nonexistent/ca.pem".into()),
            ..RedisSettings::default()
        };
        let err = missing.client().unwrap_err().to_string();
        assert!(err.contains("/nonexistent/ca.pem"), "{err}");
        let half = RedisSettings {
            tls: true,
            tls_cert_file: Some("/dev/null".into()),
            ..RedisSettings::default()
        };
        assert!(
            half.client()
                .unwrap_err()
                .to_string()
                .contains("needs its key")
        );
    }

    #[test]
    fn bad_url_is_a_settings_error() {
        let err = RedisSettings::from_url("http://nope").client().unwrap_err();
        assert!(matches!(err, QueueError::Settings(_)), "{err}");
        // A secret pasted where the URL belongs is never echoed.
        let err = RedisSettings::from_url("hunter2-password")
            .client()
            .unwrap_err()
            .to_string();
        assert!(!err.contains("hunter2"), "{err}");
    }
}
