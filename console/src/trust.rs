//! Which nodes the console may send credentials to (user JWTs through the proxy, its own
//! collector and proxy tokens, admin fan-outs).
//!
//! Anything that can write to Redis can write a heartbeat, and a heartbeat's `server_url`
//! decides where the console sends fresh tokens. So a heartbeat is trusted only when
//!
//! * its signature holds (`turnstone_runtime::auth::heartbeat`: HMAC with the cluster's JWT
//!   secret over node id, URL and signing time) and is at most `heartbeat_max_age` old —
//!   checked whenever the console has the secret; and
//! * its URL's host is in `--node-url-allow` (CIDRs or host names), when that is set.
//!
//! An untrusted node stays listed (flagged `trusted: false` with the reason) but is neither
//! polled nor proxied to, nor part of admin fan-outs.

use std::net::IpAddr;
use std::time::Duration;

use turnstone_proto::mq::NodeHeartbeat;
use turnstone_runtime::auth::{JwtSecret, heartbeat};

/// One `--node-url-allow` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum AllowEntry {
    /// An address block: the network address and its prefix length.
    Net(IpAddr, u8),
    /// A host name, compared case-insensitively; `*.example.com` matches its subdomains.
    Host(String),
}

/// `--node-url-allow` (`TURNSTONE_NODE_URL_ALLOW`): the hosts node URLs may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeUrlAllow(Vec<AllowEntry>);

impl NodeUrlAllow {
    /// Parses a comma-separated list of CIDRs (`10.0.0.0/8`, `::1/128`), addresses and host
    /// names; the error names the bad entry.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut entries = Vec::new();
        for raw in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            entries.push(parse_entry(raw).ok_or_else(|| {
                format!("--node-url-allow: '{raw}' is not a CIDR, an IP address or a host name")
            })?);
        }
        if entries.is_empty() {
            return Err("--node-url-allow is empty".into());
        }
        Ok(Self(entries))
    }

    /// Whether the host of `url` is allowed (a URL without a host never is). Host names are
    /// compared as written: they are not resolved.
    pub fn allows(&self, url: &str) -> bool {
        let Ok(parsed) = reqwest::Url::parse(url) else {
            return false;
        };
        let Some(host) = parsed.host_str().map(str::to_ascii_lowercase) else {
            return false;
        };
        let ip = host.trim_matches(['[', ']']).parse::<IpAddr>().ok();
        self.0.iter().any(|entry| match (entry, ip) {
            (AllowEntry::Net(net, len), Some(ip)) => in_block(ip, *net, *len),
            (AllowEntry::Host(name), None) => match name.strip_prefix("*.") {
                Some(parent) => host.ends_with(&format!(".{parent}")),
                None => *name == host,
            },
            _ => false,
        })
    }
}

fn parse_entry(raw: &str) -> Option<AllowEntry> {
    if let Some((addr, len)) = raw.split_once('/') {
        let addr: IpAddr = addr.parse().ok()?;
        let len: u8 = len.parse().ok()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        return (len <= max).then_some(AllowEntry::Net(addr, len));
    }
    if let Ok(addr) = raw.trim_matches(['[', ']']).parse::<IpAddr>() {
        let len = if addr.is_ipv4() { 32 } else { 128 };
        return Some(AllowEntry::Net(addr, len));
    }
    let name = raw.to_ascii_lowercase();
    let bare = name.strip_prefix("*.").unwrap_or(&name);
    let valid = !bare.is_empty()
        && bare
            .split('.')
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    valid.then_some(AllowEntry::Host(name))
}

fn in_block(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    let (ip, net, bits) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => (u128::from(u32::from(a)), u128::from(u32::from(n)), 32),
        (IpAddr::V6(a), IpAddr::V6(n)) => (u128::from(a), u128::from(n), 128),
        _ => return false,
    };
    let host_bits = bits - u32::from(len);
    let mask = if host_bits >= 128 {
        0
    } else {
        u128::MAX << host_bits
    };
    ip & mask == net & mask
}

/// Decides whether one heartbeat is trusted.
#[derive(Debug, Clone)]
pub struct HeartbeatTrust {
    /// The cluster's JWT secret; without it signatures cannot be checked.
    pub secret: Option<JwtSecret>,
    /// Oldest signature accepted.
    pub max_age: Duration,
    pub allow: Option<NodeUrlAllow>,
}

impl HeartbeatTrust {
    /// `None` when the heartbeat is trusted, else why not (shown on the node).
    pub fn judge(&self, node_id: &str, hb: &NodeHeartbeat, now: i64) -> Option<String> {
        if let Some(secret) = &self.secret
            && let Err(e) = heartbeat::verify(
                secret,
                node_id,
                &hb.server_url,
                hb.signed_at,
                hb.sig.as_deref(),
                now,
                self.max_age,
            )
        {
            return Some(e.to_string());
        }
        match &self.allow {
            Some(allow) if !allow.allows(&hb.server_url) => {
                Some("server_url not in --node-url-allow".into())
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_addresses_and_hosts() {
        let allow =
            NodeUrlAllow::parse("10.0.0.0/8, 127.0.0.1, ::1/128, node.internal, *.nodes.lan")
                .unwrap();
        for ok in [
            "http://10.1.2.3:8080",
            "http://127.0.0.1:9",
            "http://[::1]:8080",
            "https://NODE.internal/",
            "http://a.nodes.lan:1",
        ] {
            assert!(allow.allows(ok), "{ok}");
        }
        for no in [
            "http://11.0.0.1",
            "http://127.0.0.2",
            "http://evil.example",
            "http://nodes.lan",
            "http://node.internal.evil",
            "sim://x",
        ] {
            assert!(!allow.allows(no), "{no}");
        }
        assert!(NodeUrlAllow::parse("10.0.0.0/33").is_err());
        assert!(NodeUrlAllow::parse("bad host!").is_err());
        assert!(NodeUrlAllow::parse(" , ").is_err());
    }

    #[test]
    fn heartbeats_are_judged_by_signature_age_and_url() {
        let secret = JwtSecret::new("console-trust-test-secret-0123456789ab");
        let trust = HeartbeatTrust {
            secret: Some(secret.clone()),
            max_age: Duration::from_secs(60),
            allow: Some(NodeUrlAllow::parse("127.0.0.0/8").unwrap()),
        };
        let signed = |url: &str, at: i64| NodeHeartbeat {
            server_url: url.into(),
            signed_at: Some(at),
            sig: Some(heartbeat::sign(&secret, "n1", url, at)),
            ..NodeHeartbeat::default()
        };
        assert_eq!(
            trust.judge("n1", &signed("http://127.0.0.1:1", 100), 110),
            None
        );
        let unsigned = NodeHeartbeat {
            server_url: "http://127.0.0.1:1".into(),
            ..NodeHeartbeat::default()
        };
        assert!(
            trust
                .judge("n1", &unsigned, 110)
                .unwrap()
                .contains("unsigned")
        );
        assert!(
            trust
                .judge("n2", &signed("http://127.0.0.1:1", 100), 110)
                .unwrap()
                .contains("bad")
        );
        assert!(
            trust
                .judge("n1", &signed("http://127.0.0.1:1", 100), 500)
                .unwrap()
                .contains("stale")
        );
        assert!(
            trust
                .judge("n1", &signed("http://10.0.0.1:1", 100), 110)
                .unwrap()
                .contains("allow")
        );
    }
}
