//! Per-client-IP rate limiting (node spec §4.9): a token bucket per client address, off by
//! default. It sits inside auth (unauthenticated floods get 401, not 429) and exempts the
//! probe and documentation paths and `OPTIONS`.
//!
//! The client address is the socket peer, or — when the peer is a trusted proxy — the
//! right-most `X-Forwarded-For` entry that is not itself a trusted proxy. IPv4-mapped IPv6
//! addresses count as their IPv4 address, and IPv6 addresses count per /64 (one host
//! usually holds a whole /64). Buckets idle for an hour are forgotten; past [`MAX_TRACKED`]
//! addresses, a new one evicts the least recently used of a small sample (never refused).
//!
//! The node holds one limiter ([`Node::ratelimiter`](super::Node)): HTTP requests ([`limit`])
//! and gRPC calls (`crate::grpc::access`) take their tokens from the same buckets.
//!
//! This module knows HTTP requests and peers; it knows nothing of workstreams.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use serde_json::json;
use tokio::time::Instant;

use super::metrics::Metrics;

/// Most client addresses tracked at once.
pub const MAX_TRACKED: usize = 100_000;

/// A bucket untouched for this long is forgotten.
pub const IDLE_PURGE: Duration = Duration::from_secs(3600);

/// How often the limiter sweeps idle buckets (on the request path, never more often).
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Paths never limited.
pub const EXEMPT_PATHS: &[&str] = &["/health", "/metrics", "/openapi.json", "/docs"];

/// A bad rate-limit setting.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RateLimitError {
    #[error("ratelimit.trusted_proxies: `{0}` is not an IP address or CIDR")]
    BadCidr(String),
    #[error("ratelimit.requests_per_second must be a positive number, got {0}")]
    BadRate(f64),
    #[error("ratelimit.burst must be at least 1")]
    BadBurst,
}

/// An IP network (`10.0.0.0/8`, `::1/128`; a bare address is a single host).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses a comma-separated list; blanks are skipped.
    pub fn parse_list(list: &str) -> Result<Vec<Self>, RateLimitError> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::parse)
            .collect()
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, normalize(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = RateLimitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || RateLimitError::BadCidr(s.to_string());
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr = normalize(addr.trim().parse().map_err(|_| bad())?);
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p.trim().parse::<u8>().map_err(|_| bad())?,
            None => max,
        };
        if prefix > max {
            return Err(bad());
        }
        Ok(Self { addr, prefix })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// An IPv4-mapped IPv6 address as its IPv4 address; anything else unchanged.
pub fn normalize(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// The key an address is limited under: IPv4 as is, IPv6 by its /64 network.
pub fn limit_key(ip: IpAddr) -> IpAddr {
    match normalize(ip) {
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
        v4 => v4,
    }
}

/// How many buckets a full limiter looks at to pick the one to evict.
const EVICTION_SAMPLE: usize = 64;

/// Rate-limit settings (`ratelimit.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimitConfig {
    pub enabled: bool,
    /// Bucket refill rate.
    pub requests_per_second: f64,
    /// Bucket capacity.
    pub burst: u32,
    /// Peers whose `X-Forwarded-For` is believed.
    pub trusted_proxies: Vec<Cidr>,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            requests_per_second: 10.0,
            burst: 20,
            trusted_proxies: Vec::new(),
        }
    }
}

impl RateLimitConfig {
    pub fn validate(&self) -> Result<(), RateLimitError> {
        if !(self.requests_per_second.is_finite() && self.requests_per_second > 0.0) {
            return Err(RateLimitError::BadRate(self.requests_per_second));
        }
        if self.burst == 0 {
            return Err(RateLimitError::BadBurst);
        }
        Ok(())
    }

    /// Whether `ip` is a trusted proxy (`--trusted-proxy`): its `X-Forwarded-For` and
    /// `X-Forwarded-Proto` are believed.
    pub fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted_proxies.iter().any(|c| c.contains(ip))
    }

    /// The client address of a request from `peer` with these headers.
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = normalize(peer);
        if !self.is_trusted(peer) {
            return peer;
        }
        let hops: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        for hop in hops.iter().rev() {
            match hop.parse::<IpAddr>() {
                Ok(ip) if self.is_trusted(ip) => continue,
                Ok(ip) => return normalize(ip),
                // A hop we cannot read: the proxies in front of it vouch for nothing more.
                Err(_) => return peer,
            }
        }
        peer
    }
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

#[derive(Debug)]
struct Buckets {
    by_ip: HashMap<IpAddr, Bucket>,
    swept: Instant,
}

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    Allow,
    /// Refused; a token is available again after this many seconds.
    Reject {
        retry_after: f64,
    },
}

/// Token buckets by client address.
#[derive(Debug)]
pub struct RateLimiter {
    config: RateLimitConfig,
    max_tracked: usize,
    buckets: Mutex<Buckets>,
    metrics: Arc<Metrics>,
}

impl RateLimiter {
    pub fn new(config: RateLimitConfig, metrics: Arc<Metrics>) -> Self {
        Self::with_max_tracked(config, metrics, MAX_TRACKED)
    }

    pub fn with_max_tracked(
        config: RateLimitConfig,
        metrics: Arc<Metrics>,
        max_tracked: usize,
    ) -> Self {
        Self {
            config,
            max_tracked,
            buckets: Mutex::new(Buckets {
                by_ip: HashMap::new(),
                swept: Instant::now(),
            }),
            metrics,
        }
    }

    pub fn config(&self) -> &RateLimitConfig {
        &self.config
    }

    /// Addresses currently tracked.
    pub fn tracked(&self) -> usize {
        self.buckets.lock().by_ip.len()
    }

    /// Takes a token for `ip` at `now`.
    pub fn check(&self, ip: IpAddr, now: Instant) -> Decision {
        let rate = self.config.requests_per_second;
        let burst = f64::from(self.config.burst);
        let mut b = self.buckets.lock();
        if now.saturating_duration_since(b.swept) >= SWEEP_EVERY {
            b.by_ip
                .retain(|_, bucket| now.saturating_duration_since(bucket.updated) <= IDLE_PURGE);
            b.swept = now;
        }
        let ip = limit_key(ip);
        if !b.by_ip.contains_key(&ip) && b.by_ip.len() >= self.max_tracked {
            // Full: make room by evicting the least recently used bucket of a sample
            // (approximately LRU at O(sample) cost), so a flood of new addresses cannot lock
            // every other new client out.
            let victim = b
                .by_ip
                .iter()
                .take(EVICTION_SAMPLE)
                .min_by_key(|(_, bucket)| bucket.updated)
                .map(|(ip, _)| *ip);
            if let Some(victim) = victim {
                b.by_ip.remove(&victim);
            }
        }
        let bucket = b.by_ip.entry(ip).or_insert(Bucket {
            tokens: burst,
            updated: now,
        });
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(burst);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Decision::Allow
        } else {
            Decision::Reject {
                retry_after: (1.0 - bucket.tokens) / rate,
            }
        }
    }

    /// Takes a token for a request from `peer` with these headers (the client address as
    /// [`RateLimitConfig::client_ip`] reads it); a refusal is counted and logged.
    pub fn admit(&self, peer: IpAddr, headers: &HeaderMap) -> Decision {
        let ip = self.config.client_ip(peer, headers);
        let decision = self.check(ip, Instant::now());
        if let Decision::Reject { retry_after } = decision {
            self.metrics.record_ratelimit_rejection();
            tracing::debug!(client = %ip, retry_after, "rate limited");
        }
        decision
    }

    /// Forgets buckets idle for longer than [`IDLE_PURGE`] at `now`; returns how many.
    pub fn purge_idle(&self, now: Instant) -> usize {
        let mut b = self.buckets.lock();
        let before = b.by_ip.len();
        b.by_ip
            .retain(|_, bucket| now.saturating_duration_since(bucket.updated) <= IDLE_PURGE);
        b.swept = now;
        before - b.by_ip.len()
    }
}

/// The message of a refusal.
pub const RATE_LIMITED: &str = "Rate limit exceeded";

/// Whole seconds to wait after a refusal with `retry_after`: `int(retry) + 1`, always at
/// least one second, never early (the `Retry-After` header).
pub fn retry_after_secs(retry_after: f64) -> u64 {
    retry_after.max(0.0).trunc() as u64 + 1
}

/// Whether a request is never limited: `OPTIONS` and the [`EXEMPT_PATHS`].
pub fn is_exempt(method: &Method, path: &str) -> bool {
    method == Method::OPTIONS || EXEMPT_PATHS.contains(&path)
}

/// The 429 response (node spec §4.9).
pub fn too_many_requests(retry_after: f64) -> Response {
    let rounded = (retry_after * 10.0).round() / 10.0;
    let mut response = (
        StatusCode::TOO_MANY_REQUESTS,
        Json(json!({"error": RATE_LIMITED, "retry_after": rounded})),
    )
        .into_response();
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(retry_after_secs(retry_after)),
    );
    response
}

/// The middleware. Its state is the node's limiter, `None` when rate limiting is off.
/// Requests without a known peer address (a server not started by
/// [`run`](super::run)) are not limited.
pub async fn limit(
    State(limiter): State<Option<Arc<RateLimiter>>>,
    req: Request,
    next: Next,
) -> Response {
    let Some(limiter) = limiter else {
        return next.run(req).await;
    };
    if is_exempt(req.method(), req.uri().path()) {
        return next.run(req).await;
    }
    let Some(ConnectInfo(peer)) = req.extensions().get::<ConnectInfo<SocketAddr>>().copied() else {
        return next.run(req).await;
    };
    match limiter.admit(peer.ip(), req.headers()) {
        Decision::Allow => next.run(req).await,
        Decision::Reject { retry_after } => too_many_requests(retry_after),
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn limiter(rps: f64, burst: u32, max: usize) -> RateLimiter {
        let config = RateLimitConfig {
            enabled: true,
            requests_per_second: rps,
            burst,
            trusted_proxies: Vec::new(),
        };
        RateLimiter::with_max_tracked(config, Arc::new(Metrics::new()), max)
    }

    #[test]
    fn cidrs_parse_and_match() {
        let list = Cidr::parse_list("10.0.0.0/8, 192.168.1.7 ,,::1, fd00::/8").unwrap();
        assert_eq!(list.len(), 4);
        assert!(list[0].contains(ip("10.200.3.4")));
        assert!(!list[0].contains(ip("11.0.0.1")));
        assert!(list[1].contains(ip("192.168.1.7")));
        assert!(!list[1].contains(ip("192.168.1.8")));
        assert!(list[2].contains(ip("::1")));
        assert!(list[3].contains(ip("fd12::1")));
        assert!(!list[3].contains(ip("fe80::1")));
        // IPv4-mapped IPv6 is matched as IPv4.
        assert!(list[0].contains(ip("::ffff:10.1.2.3")));
        assert!("0.0.0.0/0".parse::<Cidr>().unwrap().contains(ip("8.8.8.8")));
        for bad in ["10.0.0.0/33", "nonsense", "10.0.0.0/x", "::/129"] {
            assert_eq!(
                bad.parse::<Cidr>(),
                Err(RateLimitError::BadCidr(bad.into()))
            );
        }
    }

    #[test]
    fn client_ip_believes_forwarded_for_only_from_trusted_proxies() {
        let config = RateLimitConfig {
            trusted_proxies: Cidr::parse_list("127.0.0.1, 10.0.0.0/8").unwrap(),
            ..RateLimitConfig::default()
        };
        let mut h = HeaderMap::new();
        h.insert(
            "x-forwarded-for",
            HeaderValue::from_static("1.1.1.1, 2.2.2.2, 10.0.0.5"),
        );
        // Right-most untrusted hop.
        assert_eq!(config.client_ip(ip("127.0.0.1"), &h), ip("2.2.2.2"));
        // Mapped peer is trusted too.
        assert_eq!(config.client_ip(ip("::ffff:127.0.0.1"), &h), ip("2.2.2.2"));
        // An untrusted peer's header is ignored.
        assert_eq!(config.client_ip(ip("3.3.3.3"), &h), ip("3.3.3.3"));
        // No header, or only trusted hops: the peer.
        assert_eq!(
            config.client_ip(ip("127.0.0.1"), &HeaderMap::new()),
            ip("127.0.0.1")
        );
        h.insert("x-forwarded-for", HeaderValue::from_static("10.1.1.1"));
        assert_eq!(config.client_ip(ip("127.0.0.1"), &h), ip("127.0.0.1"));
        // Mapped addresses in the header are normalised.
        h.insert(
            "x-forwarded-for",
            HeaderValue::from_static("::ffff:4.4.4.4"),
        );
        assert_eq!(
            config.client_ip(ip("127.0.0.1"), &h),
            IpAddr::V4(Ipv4Addr::new(4, 4, 4, 4))
        );
        // Garbage stops the walk at the proxy.
        h.insert("x-forwarded-for", HeaderValue::from_static("5.5.5.5, junk"));
        assert_eq!(config.client_ip(ip("127.0.0.1"), &h), ip("127.0.0.1"));
        assert_eq!(
            normalize(IpAddr::V6(Ipv6Addr::LOCALHOST)),
            IpAddr::V6(Ipv6Addr::LOCALHOST)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn buckets_allow_a_burst_then_refill_at_the_rate() {
        let l = limiter(2.0, 3, 10);
        let a = ip("1.2.3.4");
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(l.check(a, t0), Decision::Allow);
        }
        let Decision::Reject { retry_after } = l.check(a, t0) else {
            panic!("fourth request in the same instant must be refused");
        };
        assert!((retry_after - 0.5).abs() < 1e-9, "{retry_after}");
        // Another address has its own bucket.
        assert_eq!(l.check(ip("5.6.7.8"), t0), Decision::Allow);
        // Half a second refills one token at 2/s.
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!(l.check(a, t1), Decision::Allow);
        assert!(matches!(l.check(a, t1), Decision::Reject { .. }));
        // The bucket never holds more than the burst.
        let t2 = t1 + Duration::from_secs(100);
        for _ in 0..3 {
            assert_eq!(l.check(a, t2), Decision::Allow);
        }
        assert!(matches!(l.check(a, t2), Decision::Reject { .. }));
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_limiter_evicts_the_least_recent_instead_of_refusing() {
        let l = limiter(1.0, 5, 2);
        let t0 = Instant::now();
        assert_eq!(l.check(ip("1.0.0.1"), t0), Decision::Allow);
        let t1 = t0 + Duration::from_millis(10);
        assert_eq!(l.check(ip("1.0.0.2"), t1), Decision::Allow);
        // A new address is served; the least recently used bucket (1.0.0.1) made room.
        assert_eq!(l.check(ip("1.0.0.3"), t1), Decision::Allow);
        assert_eq!(l.tracked(), 2);
        assert!(!l.buckets.lock().by_ip.contains_key(&ip("1.0.0.1")));
        // After an idle hour the buckets are swept on the next request.
        let later = t0 + IDLE_PURGE + Duration::from_secs(61);
        assert_eq!(l.check(ip("1.0.0.4"), later), Decision::Allow);
        assert_eq!(l.tracked(), 1);
        assert_eq!(l.purge_idle(later + IDLE_PURGE * 2), 1);
        assert_eq!(l.tracked(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn ipv6_addresses_share_a_bucket_per_64() {
        let l = limiter(1.0, 2, 100);
        let t0 = Instant::now();
        assert_eq!(l.check(ip("2001:db8:1:2::1"), t0), Decision::Allow);
        assert_eq!(l.check(ip("2001:db8:1:2:ffff::9"), t0), Decision::Allow);
        assert!(matches!(
            l.check(ip("2001:db8:1:2:abcd::7"), t0),
            Decision::Reject { .. }
        ));
        assert_eq!(l.check(ip("2001:db8:1:3::1"), t0), Decision::Allow);
        assert_eq!(limit_key(ip("10.1.2.3")), ip("10.1.2.3"));
    }

    #[test]
    fn rejection_has_the_original_body_and_retry_after() {
        let r = too_many_requests(2.345);
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "3");
        let r = too_many_requests(0.04);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
    }

    #[test]
    fn config_is_validated() {
        assert_eq!(RateLimitConfig::default().validate(), Ok(()));
        let bad = RateLimitConfig {
            requests_per_second: 0.0,
            ..RateLimitConfig::default()
        };
        assert_eq!(bad.validate(), Err(RateLimitError::BadRate(0.0)));
        let bad = RateLimitConfig {
            burst: 0,
            ..RateLimitConfig::default()
        };
        assert_eq!(bad.validate(), Err(RateLimitError::BadBurst));
    }
}
