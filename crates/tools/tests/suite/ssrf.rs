//! SSRF screening: the address table, names resolving to refused addresses, and redirect
//! chains through a real local server.

use std::collections::HashMap;
use std::net::IpAddr;

use serde_json::json;
use turnstone_tools::web::fetch::{self, FetchConfig};
use turnstone_tools::web::ssrf::{self, AddressClass, SsrfPolicy};
use turnstone_tools::{Tool, ToolContext, WebFetchTool, WebOptions};

use super::web_support::{call, site};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Allowed always.
    Public,
    /// Allowed only with `allow_private_network`.
    Private,
    /// Refused even with the opt-in.
    Forbidden,
}

const TABLE: &[(&str, Expect)] = &[
    // Plain IPv4.
    ("8.8.8.8", Expect::Public),
    ("93.184.216.34", Expect::Public),
    ("1.1.1.1", Expect::Public),
    ("127.0.0.1", Expect::Private),
    ("127.255.255.254", Expect::Private),
    ("10.0.0.1", Expect::Private),
    ("172.16.5.4", Expect::Private),
    ("172.31.255.255", Expect::Private),
    ("172.32.0.1", Expect::Public),
    ("192.168.1.1", Expect::Private),
    ("100.64.0.1", Expect::Private),
    ("100.127.255.254", Expect::Private),
    ("100.128.0.1", Expect::Public),
    ("169.254.169.254", Expect::Forbidden),
    ("169.254.170.2", Expect::Forbidden),
    ("100.100.100.200", Expect::Forbidden),
    ("169.254.1.1", Expect::Forbidden),
    ("0.0.0.0", Expect::Forbidden),
    ("0.1.2.3", Expect::Forbidden),
    ("224.0.0.1", Expect::Forbidden),
    ("239.255.255.250", Expect::Forbidden),
    ("255.255.255.255", Expect::Forbidden),
    ("240.0.0.1", Expect::Forbidden),
    ("192.0.2.10", Expect::Forbidden),
    ("198.51.100.7", Expect::Forbidden),
    ("203.0.113.99", Expect::Forbidden),
    ("198.18.0.1", Expect::Forbidden),
    ("192.0.0.8", Expect::Forbidden),
    // Plain IPv6.
    ("2606:4700:4700::1111", Expect::Public),
    ("::1", Expect::Private),
    ("::", Expect::Forbidden),
    ("fc00::1", Expect::Private),
    ("fd12:3456:789a::1", Expect::Private),
    ("fd00:ec2::254", Expect::Forbidden),
    ("fe80::1", Expect::Forbidden),
    ("febf::1", Expect::Forbidden),
    ("ff02::1", Expect::Forbidden),
    ("2001:db8::1", Expect::Forbidden),
    ("100::1", Expect::Forbidden),
    ("4000::1", Expect::Forbidden),
    // IPv4-mapped / translated / compatible.
    ("::ffff:127.0.0.1", Expect::Private),
    ("::ffff:10.1.2.3", Expect::Private),
    ("::ffff:169.254.169.254", Expect::Forbidden),
    ("::ffff:8.8.8.8", Expect::Public),
    ("::ffff:0:127.0.0.1", Expect::Private),
    ("::127.0.0.1", Expect::Private),
    ("::169.254.169.254", Expect::Forbidden),
    // NAT64.
    ("64:ff9b::a9fe:a9fe", Expect::Forbidden),
    ("64:ff9b::7f00:1", Expect::Private),
    ("64:ff9b::c0a8:101", Expect::Private),
    ("64:ff9b::808:808", Expect::Public),
    ("64:ff9b:1:a9fe:a9:fe00::", Expect::Forbidden),
    ("64:ff9b:1::a9fe:a9fe", Expect::Forbidden),
    ("64:ff9b:1::7f00:1", Expect::Private),
    // 6to4: the IPv4 in bits 16..48.
    ("2002:a9fe:a9fe::1", Expect::Forbidden),
    ("2002:7f00:1::", Expect::Private),
    ("2002:c0a8:101::42", Expect::Private),
    ("2002:808:808::1", Expect::Public),
    // Teredo: client IPv4 = NOT of the last 32 bits.
    ("2001:0:4136:e378:8000:63bf:5601:5601", Expect::Forbidden), // 169.254.169.254
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", Expect::Private),   // 127.0.0.1
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", Expect::Private),   // 10.0.0.1
    ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", Expect::Public),    // 8.8.8.8
];

#[test]
fn address_table_is_judged_as_the_seed_says() {
    assert!(TABLE.len() >= 30);
    let closed = SsrfPolicy::default();
    let open = SsrfPolicy {
        allow_private_network: true,
    };
    let mut wrong = Vec::new();
    for (text, expect) in TABLE {
        let ip: IpAddr = text.parse().unwrap();
        let class = ssrf::classify(ip);
        let got = match class {
            AddressClass::Public => Expect::Public,
            AddressClass::Private(_) => Expect::Private,
            AddressClass::Forbidden(_) => Expect::Forbidden,
        };
        let default_ok = ssrf::screen(ip, closed).is_ok();
        let open_ok = ssrf::screen(ip, open).is_ok();
        let expected = (
            *expect,
            *expect == Expect::Public,
            *expect != Expect::Forbidden,
        );
        if (got, default_ok, open_ok) != expected {
            wrong.push(format!(
                "{text}: got {class:?} default={default_ok} open={open_ok}"
            ));
        }
    }
    assert!(wrong.is_empty(), "misjudged:\n{}", wrong.join("\n"));
}

fn options(allow_private: bool) -> WebOptions {
    let mut static_hosts = HashMap::new();
    static_hosts.insert(
        "metadata.test".to_owned(),
        vec!["169.254.169.254".parse().unwrap()],
    );
    static_hosts.insert(
        "mapped-metadata.test".to_owned(),
        vec!["::ffff:169.254.169.254".parse().unwrap()],
    );
    static_hosts.insert(
        "internal.test".to_owned(),
        vec!["10.20.30.40".parse().unwrap()],
    );
    // One refused and one allowed address: only the allowed one is handed to the connector.
    static_hosts.insert(
        "mixed.test".to_owned(),
        vec![
            "169.254.169.254".parse().unwrap(),
            "127.0.0.1".parse().unwrap(),
        ],
    );
    WebOptions {
        enabled: true,
        allow_private_network: allow_private,
        static_hosts,
        ..WebOptions::default()
    }
}

fn config(allow_private: bool) -> FetchConfig {
    options(allow_private).fetch_config()
}

#[tokio::test]
async fn default_policy_refuses_the_local_test_server() {
    let site = site().await;
    // Literal loopback: refused before connecting, both by the tool's prepare and the fetcher.
    let tool = WebFetchTool::new(&options(false)).unwrap();
    let ctx = ToolContext::new("/");
    let err = tool
        .prepare(json!({"url": site.url("/page"), "question": "q"}), &ctx)
        .unwrap_err();
    assert!(err.contains("private address"), "{err}");
    let err = fetch::fetch(&site.url("/page"), &config(false))
        .await
        .unwrap_err();
    assert!(err.is_blocked(), "{err}");
    // The name `localhost` resolves to loopback: refused at connect time.
    let err = fetch::fetch(&site.localhost_url("/page"), &config(false))
        .await
        .unwrap_err();
    assert!(err.is_blocked(), "{err}");
    assert!(
        err.to_string()
            .contains("localhost resolves only to refused addresses"),
        "{err}"
    );
    let out = call(
        &tool,
        json!({"url": site.localhost_url("/page"), "question": "q"}),
        &ctx,
    )
    .await;
    assert!(
        out.is_error && out.content.contains("refused"),
        "{}",
        out.content
    );
    assert_eq!(site.hits(), 0, "the server must never have been contacted");
    // With the opt-in, the same URL is fetched.
    let page = fetch::fetch(&site.localhost_url("/page"), &config(true))
        .await
        .unwrap();
    assert_eq!(page.status, 200);
    assert_eq!(site.hits(), 1);
}

#[tokio::test]
async fn names_resolving_to_refused_addresses_are_refused() {
    for allow in [false, true] {
        for host in ["metadata.test", "mapped-metadata.test"] {
            let err = fetch::fetch(&format!("http://{host}/latest/meta-data/"), &config(allow))
                .await
                .unwrap_err();
            assert!(err.is_blocked(), "{host}: {err}");
            assert!(err.to_string().contains("cloud metadata"), "{err}");
        }
    }
    let err = fetch::fetch("http://internal.test/", &config(false))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("private address"), "{err}");
}

#[tokio::test]
async fn only_screened_addresses_of_a_name_are_connected() {
    let site = site().await;
    let url = format!("http://mixed.test:{}/page", site.addr.port());
    let page = fetch::fetch(&url, &config(true)).await.unwrap();
    assert_eq!(page.status, 200);
    let remote = page.remote_addr.unwrap();
    assert_eq!(remote.ip(), "127.0.0.1".parse::<IpAddr>().unwrap());
    assert_eq!(site.hits(), 1);
    // Without the opt-in neither address survives.
    let err = fetch::fetch(&url, &config(false)).await.unwrap_err();
    assert!(err.is_blocked(), "{err}");
    assert_eq!(site.hits(), 1);
}

/// Redirect targets from a private server the operator allowed: private ones are followed,
/// forbidden ones (also in transition forms) and non-HTTP schemes are refused.
#[tokio::test]
async fn redirect_chains_are_screened_hop_by_hop() {
    let site = site().await;
    let port = site.addr.port();
    let chains: Vec<(String, bool)> = vec![
        (format!("http://localhost:{port}/page"), true),
        (format!("http://127.0.0.1:{port}/hop/2"), true),
        ("/hop/1".to_owned(), true),
        ("http://169.254.169.254/latest/meta-data/".to_owned(), false),
        ("http://[::ffff:169.254.169.254]/".to_owned(), false),
        ("http://[::ffff:a9fe:a9fe]/".to_owned(), false),
        ("http://[64:ff9b::a9fe:a9fe]/".to_owned(), false),
        ("http://[2002:a9fe:a9fe::1]/".to_owned(), false),
        (
            "http://[2001:0:4136:e378:8000:63bf:5601:5601]/".to_owned(),
            false,
        ),
        ("http://[fe80::1]/".to_owned(), false),
        ("http://[fd00:ec2::254]/".to_owned(), false),
        ("http://224.0.0.251/".to_owned(), false),
        (format!("http://0.0.0.0:{port}/page"), false),
        ("http://metadata.test/".to_owned(), false),
        ("http://2852039166/".to_owned(), false), // 169.254.169.254 in decimal
        ("ftp://127.0.0.1/file".to_owned(), false),
        ("file:///etc/passwd".to_owned(), false),
        ("gopher://127.0.0.1:6379/_INFO".to_owned(), false),
    ];
    let cfg = config(true);
    for (target, allowed) in &chains {
        let url = format!("{}?to={}", site.url("/redirect"), url_escape(target));
        let before = site.hits();
        let result = fetch::fetch(&url, &cfg).await;
        match (allowed, &result) {
            (true, Ok(page)) => {
                assert_eq!(page.status, 200, "{target}");
                assert!(String::from_utf8_lossy(&page.body).contains("The answer is"));
            }
            (false, Err(e)) => {
                assert!(e.is_blocked(), "{target}: {e}");
                // Only the redirecting hop reached the server.
                assert_eq!(site.hits(), before + 1, "{target}");
            }
            _ => panic!("{target}: expected allowed={allowed}, got {result:?}"),
        }
    }
}

#[tokio::test]
async fn at_most_five_redirects_are_followed() {
    let site = site().await;
    let cfg = config(true);
    let page = fetch::fetch(&site.url("/hop/5"), &cfg).await.unwrap();
    assert_eq!(page.redirects.len(), 5);
    assert!(page.url.as_str().ends_with("/hop/0"));
    let err = fetch::fetch(&site.url("/hop/6"), &cfg).await.unwrap_err();
    assert!(
        matches!(err, fetch::FetchError::TooManyRedirects { max: 5, .. }),
        "{err}"
    );
    assert_eq!(site.hits(), 6 + 6, "the seventh hop is never requested");
}

fn url_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
