//! An SSRF-screened HTTP GET: the address judged is the one actually connected.
//!
//! - Names are resolved by [`ScreeningResolver`] (a `reqwest` DNS resolver): it resolves
//!   with the system resolver (tokio `lookup_host`) and hands the connector only the
//!   addresses [`ssrf::screen`] allows, or an error when none survive. Literal-IP URLs, which
//!   never reach a resolver, are screened directly. No proxy is ever used (a proxy would
//!   connect on our behalf to an address we never judged).
//! - Redirects are followed by hand (`redirect::Policy::none()`): at most
//!   [`FetchConfig::max_redirects`] hops, `http`/`https` only, each hop screened before it is
//!   requested. Once a hop has reached a public address, later hops may not enter private
//!   space even with the opt-in (a public site redirecting inward is refused regardless).
//! - The connected address reported by the response is screened again (defence in depth).

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

use super::ssrf::{self, Refusal, SsrfPolicy};

/// Settings of one fetch.
#[derive(Debug, Clone)]
pub struct FetchConfig {
    /// `tools.allow_private_network`.
    pub allow_private_network: bool,
    /// Whole-fetch deadline (all hops and the body).
    pub timeout: Duration,
    /// Body bytes kept; the rest is not read.
    pub max_bytes: usize,
    /// Redirect hops followed at most.
    pub max_redirects: usize,
    /// Fixed name → addresses mappings consulted before DNS (still screened). For tests and
    /// operator pinning; empty by default.
    pub static_hosts: Arc<HashMap<String, Vec<IpAddr>>>,
    pub user_agent: String,
}

impl Default for FetchConfig {
    fn default() -> Self {
        Self {
            allow_private_network: false,
            timeout: Duration::from_secs(30),
            max_bytes: 5 * 1024 * 1024,
            max_redirects: 5,
            static_hosts: Arc::default(),
            user_agent: concat!("turnstone/", env!("CARGO_PKG_VERSION"), " (web_fetch)").to_owned(),
        }
    }
}

/// A fetched response (after redirects).
#[derive(Debug, Clone)]
pub struct FetchedPage {
    /// The URL of the final hop.
    pub url: Url,
    pub status: u16,
    pub content_type: Option<String>,
    /// At most `max_bytes` bytes of the body.
    pub body: Vec<u8>,
    /// Whether the body was cut at `max_bytes`.
    pub truncated: bool,
    /// The address the final hop connected to.
    pub remote_addr: Option<SocketAddr>,
    /// The redirect targets followed, in order.
    pub redirects: Vec<Url>,
}

/// Why a fetch failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FetchError {
    #[error("invalid URL '{url}': {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("refused to fetch {url}: {reason}")]
    Blocked { url: String, reason: String },
    #[error("too many redirects: more than {max} hops starting from {url}")]
    TooManyRedirects { url: String, max: usize },
    #[error("timed out after {secs:.1} s fetching {url}")]
    Timeout { url: String, secs: f64 },
    #[error("request to {url} failed: {reason}")]
    Network { url: String, reason: String },
}

impl FetchError {
    /// Whether the failure is an SSRF refusal.
    pub fn is_blocked(&self) -> bool {
        matches!(self, FetchError::Blocked { .. })
    }
}

/// Parses a URL the way `web_fetch` accepts it: `http`/`https` with a host.
pub fn parse_url(raw: &str) -> Result<Url, FetchError> {
    let invalid = |reason: String| FetchError::InvalidUrl {
        url: raw.to_owned(),
        reason,
    };
    let url = Url::parse(raw.trim()).map_err(|e| invalid(e.to_string()))?;
    check_scheme(&url).map_err(invalid)?;
    Ok(url)
}

fn check_scheme(url: &Url) -> Result<(), String> {
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(format!(
                "scheme '{other}' is not allowed (only http and https)"
            ));
        }
    }
    if url.host().is_none() {
        return Err("the URL has no host".to_owned());
    }
    Ok(())
}

/// Screens what can be judged before connecting: the scheme and a literal-IP host.
pub fn screen_url(url: &Url, policy: SsrfPolicy) -> Result<(), FetchError> {
    check_scheme(url).map_err(|reason| FetchError::Blocked {
        url: url.to_string(),
        reason,
    })?;
    let ip = match url.host() {
        Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
        _ => return Ok(()),
    };
    ssrf::screen(ip, policy)
        .map(|_| ())
        .map_err(|r| FetchError::Blocked {
            url: url.to_string(),
            reason: r.to_string(),
        })
}

/// The policy of the next hop: private space stays open only while no earlier hop has
/// reached a public address.
pub fn hop_policy(allow_private_network: bool, reached_public: bool) -> SsrfPolicy {
    SsrfPolicy {
        allow_private_network: allow_private_network && !reached_public,
    }
}

/// All addresses of a name were refused.
#[derive(Debug)]
pub struct BlockedName {
    pub host: String,
    pub refusals: Vec<Refusal>,
}

impl fmt::Display for BlockedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reasons: Vec<String> = self.refusals.iter().map(ToString::to_string).collect();
        write!(
            f,
            "{} resolves only to refused addresses: {}",
            self.host,
            reasons.join("; ")
        )
    }
}

impl std::error::Error for BlockedName {}

/// A `reqwest` DNS resolver that returns only addresses allowed by the SSRF policy.
#[derive(Debug, Clone)]
pub struct ScreeningResolver {
    policy: SsrfPolicy,
    static_hosts: Arc<HashMap<String, Vec<IpAddr>>>,
}

impl ScreeningResolver {
    pub fn new(policy: SsrfPolicy, static_hosts: Arc<HashMap<String, Vec<IpAddr>>>) -> Self {
        Self {
            policy,
            static_hosts,
        }
    }

    /// Resolves and screens `host`: the allowed addresses (port 0), or why there are none.
    pub async fn resolve_screened(
        &self,
        host: &str,
    ) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let key = host.trim_end_matches('.').to_ascii_lowercase();
        let addrs: Vec<IpAddr> = match self.static_hosts.get(&key) {
            Some(fixed) => fixed.clone(),
            None => tokio::net::lookup_host((host, 0))
                .await?
                .map(|sa| sa.ip())
                .collect(),
        };
        let mut allowed = Vec::new();
        let mut refusals = Vec::new();
        for ip in addrs {
            match ssrf::screen(ip, self.policy) {
                Ok(_) => allowed.push(SocketAddr::new(ip, 0)),
                Err(r) => refusals.push(r),
            }
        }
        if allowed.is_empty() {
            if refusals.is_empty() {
                return Err(format!("{host} did not resolve to any address").into());
            }
            return Err(Box::new(BlockedName {
                host: host.to_owned(),
                refusals,
            }));
        }
        Ok(allowed)
    }
}

impl Resolve for ScreeningResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = self.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = this.resolve_screened(&host).await?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

fn client(policy: SsrfPolicy, cfg: &FetchConfig) -> Result<reqwest::Client, String> {
    turnstone_http::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(ScreeningResolver::new(policy, cfg.static_hosts.clone()))
        .connect_timeout(cfg.timeout)
        .user_agent(cfg.user_agent.clone())
        .build()
        .map_err(|e| format!("cannot build HTTP client: {}", turnstone_http::describe(&e)))
}

/// Turns a transport error into a [`FetchError`], finding a screening refusal in its chain.
fn transport_error(err: &reqwest::Error, url: &Url) -> FetchError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(blocked) = e.downcast_ref::<BlockedName>() {
            return FetchError::Blocked {
                url: url.to_string(),
                reason: blocked.to_string(),
            };
        }
        source = e.source();
    }
    let mut reason = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(e) = source {
        reason.push_str(": ");
        reason.push_str(&e.to_string());
        source = e.source();
    }
    FetchError::Network {
        url: url.to_string(),
        reason,
    }
}

/// Fetches `raw_url` with screening, manual redirects, a size cap and a deadline.
pub async fn fetch(raw_url: &str, cfg: &FetchConfig) -> Result<FetchedPage, FetchError> {
    let url = parse_url(raw_url)?;
    match tokio::time::timeout(cfg.timeout, fetch_hops(url.clone(), cfg)).await {
        Ok(result) => result,
        Err(_) => Err(FetchError::Timeout {
            url: url.to_string(),
            secs: cfg.timeout.as_secs_f64(),
        }),
    }
}

async fn fetch_hops(start: Url, cfg: &FetchConfig) -> Result<FetchedPage, FetchError> {
    let mut url = start.clone();
    let mut redirects = Vec::new();
    let mut reached_public = false;
    loop {
        let policy = hop_policy(cfg.allow_private_network, reached_public);
        screen_url(&url, policy)?;
        let http = client(policy, cfg).map_err(|reason| FetchError::Network {
            url: url.to_string(),
            reason,
        })?;
        let mut resp = http
            .get(url.clone())
            .send()
            .await
            .map_err(|e| transport_error(&e, &url))?;
        let remote = resp.remote_addr();
        if let Some(addr) = remote {
            ssrf::screen(addr.ip(), policy).map_err(|r| FetchError::Blocked {
                url: url.to_string(),
                reason: r.to_string(),
            })?;
        }
        // Unknown peer: assume public, the stricter case for later hops.
        if remote.is_none_or(|a| ssrf::classify(a.ip()).is_public()) {
            reached_public = true;
        }
        let status = resp.status();
        let location = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308)
            && let Some(location) = location
        {
            if redirects.len() >= cfg.max_redirects {
                return Err(FetchError::TooManyRedirects {
                    url: start.to_string(),
                    max: cfg.max_redirects,
                });
            }
            let next = url.join(&location).map_err(|e| FetchError::Blocked {
                url: url.to_string(),
                reason: format!("invalid redirect target '{location}': {e}"),
            })?;
            redirects.push(next.clone());
            url = next;
            continue;
        }
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body = Vec::new();
        let mut truncated = false;
        while let Some(chunk) = resp.chunk().await.map_err(|e| transport_error(&e, &url))? {
            let room = cfg.max_bytes.saturating_sub(body.len());
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        return Ok(FetchedPage {
            url,
            status: status.as_u16(),
            content_type,
            body,
            truncated,
            remote_addr: remote,
            redirects,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_before_connecting() {
        assert!(parse_url("ftp://example.com/").is_err());
        assert!(parse_url("file:///etc/passwd").is_err());
        assert!(parse_url("not a url").is_err());
        let closed = SsrfPolicy::default();
        let lit = parse_url("http://[::ffff:127.0.0.1]:8080/").unwrap();
        assert!(screen_url(&lit, closed).unwrap_err().is_blocked());
        // Decimal and hex IPv4 spellings are normalised by the URL parser, then screened.
        let dec = parse_url("http://2130706433/").unwrap();
        assert!(screen_url(&dec, closed).is_err());
        let hex = parse_url("http://0xa9.0xfe.0xa9.0xfe/").unwrap();
        assert!(
            screen_url(
                &hex,
                SsrfPolicy {
                    allow_private_network: true
                }
            )
            .unwrap_err()
            .to_string()
            .contains("metadata")
        );
        let name = parse_url("http://example.com/").unwrap();
        assert!(screen_url(&name, closed).is_ok());
    }

    #[test]
    fn public_hops_close_private_space() {
        assert!(hop_policy(true, false).allow_private_network);
        assert!(!hop_policy(true, true).allow_private_network);
        assert!(!hop_policy(false, false).allow_private_network);
    }
}
