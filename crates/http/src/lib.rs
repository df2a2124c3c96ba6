//! # turnstone-http
//!
//! Every outbound HTTPS client of Turnstone (model providers, `web_fetch`/`web_search`/
//! `notify`, MCP over HTTP, the OTLP exporter) starts from [`client_builder`] (or
//! [`blocking_client_builder`]): TLS trusts the system's CA roots **and** the bundled Mozilla
//! roots (`webpki-root-certs`), so HTTPS works in a minimal image without a CA store (where
//! rustls' platform verifier alone fails with "No CA certificates were loaded from the
//! system"), and an operator's own CA in the system store still counts. [`describe`] turns a
//! `reqwest` error into its whole cause chain ("builder error" alone names nothing).
//!
//! [`trace_context`] carries the W3C trace context on outbound (and inbound) headers.
//!
//! It must not know anything but HTTP clients.

use std::sync::OnceLock;

pub mod trace_context;

/// The bundled roots, parsed once.
fn bundled_roots() -> &'static [reqwest::Certificate] {
    static ROOTS: OnceLock<Vec<reqwest::Certificate>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        webpki_root_certs::TLS_SERVER_ROOT_CERTS
            .iter()
            .filter_map(|der| reqwest::Certificate::from_der(der.as_ref()).ok())
            .collect()
    })
}

/// An async client builder trusting the system roots plus the bundled ones.
pub fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().tls_certs_merge(bundled_roots().iter().cloned())
}

/// A blocking client builder (the OTLP exporter's) with the same roots. Build it off the
/// async runtime's threads.
pub fn blocking_client_builder() -> reqwest::blocking::ClientBuilder {
    reqwest::blocking::Client::builder().tls_certs_merge(bundled_roots().iter().cloned())
}

/// `e` with every cause behind it: `builder error: … : No CA certificates were loaded…`.
pub fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_roots_parse_and_a_client_builds() {
        assert!(bundled_roots().len() > 100, "{}", bundled_roots().len());
        client_builder().build().unwrap();
    }

    #[test]
    fn describe_walks_the_cause_chain() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("builder error")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::other("No CA certificates were loaded"));
        assert_eq!(
            describe(&e),
            "builder error: No CA certificates were loaded"
        );
    }
}
