//! The transport both provider adapters share: sending a request and classifying what comes
//! back before the first byte of the body (a transport failure, or an HTTP status that is
//! an error), and the clipped texts error messages quote.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use crate::error::LlmError;

/// What a provider's HTTP client sends with every request and how long it waits.
pub(crate) struct ClientSettings<'a> {
    /// The provider's own headers (e.g. the API version).
    pub headers: HeaderMap,
    /// The configured extra headers, added after the provider's own.
    pub extra_headers: &'a BTreeMap<String, String>,
    /// The header carrying the API key and its value, marked sensitive.
    pub credential: Option<(HeaderName, String)>,
    pub connect_timeout: Duration,
    /// Until the response head, and per read of the body.
    pub request_timeout: Duration,
}

/// Builds a provider's HTTP client. Fails (as [`LlmError::Connect`]) only on an invalid
/// header or an HTTP client that cannot be built.
pub(crate) fn client(settings: ClientSettings<'_>) -> Result<reqwest::Client, LlmError> {
    let mut headers = settings.headers;
    for (name, value) in settings.extra_headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| LlmError::Connect(format!("invalid extra header name {name:?}: {e}")))?;
        let value = HeaderValue::from_str(value)
            .map_err(|e| LlmError::Connect(format!("invalid value for header {name}: {e}")))?;
        headers.insert(name, value);
    }
    if let Some((name, secret)) = settings.credential {
        let mut value = HeaderValue::from_str(&secret)
            .map_err(|_| LlmError::Connect("API key is not a valid header value".into()))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    turnstone_http::client_builder()
        .default_headers(headers)
        .connect_timeout(settings.connect_timeout)
        .read_timeout(settings.request_timeout)
        .build()
        .map_err(|e| {
            LlmError::Connect(format!(
                "cannot build HTTP client: {}",
                turnstone_http::describe(&e)
            ))
        })
}

/// A response head whose status is not a success: what its error needs besides the body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FailedHead {
    pub status: u16,
    /// `Retry-After`, if the server sent one in seconds.
    pub retry_after: Option<Duration>,
}

impl FailedHead {
    /// The error of this status with `body` as its text: 429 is rate limiting, 5xx a
    /// server error (both retryable), any other status the client's fault.
    pub fn error(self, body: String) -> LlmError {
        let (status, retry_after) = (self.status, self.retry_after);
        match status {
            429 => LlmError::RateLimited { retry_after, body },
            500..=599 => LlmError::Server {
                status,
                retry_after,
                body,
            },
            _ => LlmError::Client { status, body },
        }
    }
}

/// Sends `request` and waits up to `timeout` for the response head: the response when its
/// status is a success, else the failed head and the response (for its error body); `Err`
/// when the request itself failed.
pub(crate) async fn response_head(
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<Result<reqwest::Response, (FailedHead, reqwest::Response)>, LlmError> {
    // The turn's trace continues at the provider (W3C `traceparent`).
    let request = request.headers(turnstone_http::trace_context::current_headers());
    let response = tokio::time::timeout(timeout, request.send())
        .await
        .map_err(|_| LlmError::Timeout(format!("no response head within {timeout:?}")))?
        .map_err(classify_transport)?;
    let status = response.status();
    if status.is_success() {
        return Ok(Ok(response));
    }
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(parse_retry_after);
    let failed = FailedHead {
        status: status.as_u16(),
        retry_after,
    };
    Ok(Err((failed, response)))
}

/// The text of an error response, if it arrives within five seconds; never fails.
pub(crate) async fn error_text(response: reqwest::Response) -> Option<String> {
    tokio::time::timeout(Duration::from_secs(5), response.text())
        .await
        .ok()?
        .ok()
}

/// Classifies a reqwest error that happened before the response head.
fn classify_transport(error: reqwest::Error) -> LlmError {
    let text = error_chain(&error);
    if error.is_timeout() {
        LlmError::Timeout(text)
    } else {
        LlmError::Connect(text)
    }
}

/// The error and its sources, joined: reqwest's top-level message alone says little.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// `Retry-After` in seconds (integer or decimal); HTTP dates are not honoured.
fn parse_retry_after(value: &HeaderValue) -> Option<Duration> {
    let secs: f64 = value.to_str().ok()?.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

/// At most 200 characters of `text`, for error messages.
pub(crate) fn clip(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_parsing() {
        let parse = |s: &str| parse_retry_after(&HeaderValue::from_str(s).unwrap());
        assert_eq!(parse("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse("-1"), None);
    }
}
