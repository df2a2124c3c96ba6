//! `web_fetch`: fetch a URL through the SSRF-screened fetcher, turn it into text, and answer
//! the question from it with the configured [`PageAnswerer`] (or return the page text).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use url::Host;

use super::{finish, header, schema_definition};
use crate::arguments::Args;
use crate::error::RegistryError;
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};
use crate::web::fetch::{self, FetchConfig};
use crate::web::html::{BodyKind, body_kind, html_to_text, tidy};
use crate::web::ssrf::{self, AddressClass};
use crate::web::{PageAnswerer, WebOptions};

/// Used when the call gives no question (a bare URL rescued by the primary key).
const DEFAULT_QUESTION: &str = "Summarize the main content of the page.";

/// The `web_fetch` tool.
#[derive(Clone)]
pub struct WebFetchTool {
    definition: ToolDefinition,
    config: FetchConfig,
    answerer: Option<Arc<dyn PageAnswerer>>,
    max_page_chars: usize,
}

impl std::fmt::Debug for WebFetchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebFetchTool")
            .field("config", &self.config)
            .field("answerer", &self.answerer.is_some())
            .finish_non_exhaustive()
    }
}

impl WebFetchTool {
    pub fn new(options: &WebOptions) -> Result<Self, RegistryError> {
        Ok(Self {
            definition: schema_definition(
                "web_fetch",
                include_str!("../../schemas/web_fetch.json"),
            )?,
            config: options.fetch_config(),
            answerer: options.page_answerer.clone(),
            max_page_chars: options.max_page_chars.max(1000),
        })
    }
}

/// Whether the URL visibly targets private space (literal private IP or `localhost`): the
/// approval header marks such requests.
fn visibly_private(url: &url::Url) -> bool {
    let ip = match url.host() {
        Some(Host::Ipv4(v4)) => std::net::IpAddr::V4(v4),
        Some(Host::Ipv6(v6)) => std::net::IpAddr::V6(v6),
        Some(Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            return d == "localhost" || d.ends_with(".localhost");
        }
        None => return false,
    };
    matches!(ssrf::classify(ip), AddressClass::Private(_))
}

#[async_trait]
impl Tool for WebFetchTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        let a = Args::new(&args)?;
        let raw = a.non_blank("url")?;
        let question = match a.opt_string("question")? {
            Some(q) if !q.trim().is_empty() => q.trim(),
            _ => DEFAULT_QUESTION,
        };
        let url = fetch::parse_url(raw).map_err(|e| e.to_string())?;
        // Refuse what can be judged now (literal addresses); names are judged at connect time.
        fetch::screen_url(
            &url,
            ssrf::SsrfPolicy {
                allow_private_network: self.config.allow_private_network,
            },
        )
        .map_err(|e| e.to_string())?;
        let mut head = header("web_fetch", url.as_str());
        if visibly_private(&url) {
            head.push_str(" [private network]");
        }
        Ok(Prepared {
            args: json!({ "url": url.as_str(), "question": question }),
            header: head,
            preview: format!("Question: {question}"),
            needs_approval: true,
            approval_label: "web_fetch".to_owned(),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let url = prepared.text("url").unwrap_or("");
        let question = prepared.text("question").unwrap_or(DEFAULT_QUESTION);
        finish(self.run(url, question).await, ctx)
    }
}

impl WebFetchTool {
    async fn run(&self, url: &str, question: &str) -> ToolOutput {
        let page = match fetch::fetch(url, &self.config).await {
            Ok(page) => page,
            Err(e) => return ToolOutput::error(format!("Error: {e}")),
        };
        let final_url = page.url.to_string();
        let kind = match body_kind(page.content_type.as_deref(), &page.body) {
            Ok(kind) => kind,
            Err(mime) => {
                return ToolOutput::error(format!(
                    "Error: {final_url} returned {mime} ({} bytes{}), which is not text; \
                     web_fetch reads HTML and text only",
                    page.body.len(),
                    if page.truncated { "+" } else { "" }
                ));
            }
        };
        let text = match kind {
            BodyKind::Html => html_to_text(&page.body),
            BodyKind::Text => tidy(&String::from_utf8_lossy(&page.body)),
        };
        if !(200..300).contains(&page.status) {
            let excerpt: String = text.chars().take(500).collect();
            return ToolOutput::error(format!(
                "Error: {final_url} answered HTTP {}{}",
                page.status,
                if excerpt.is_empty() {
                    String::new()
                } else {
                    format!(":\n{excerpt}")
                }
            ));
        }
        let mut notes = Vec::new();
        if !page.redirects.is_empty() {
            notes.push(format!("redirected to {final_url}"));
        }
        if page.truncated {
            notes.push(format!("body cut at {} bytes", self.config.max_bytes));
        }
        let (page_text, cut) = head_chars(&text, self.max_page_chars);
        if cut {
            notes.push(format!(
                "page text cut to {} of {} characters",
                self.max_page_chars,
                text.chars().count()
            ));
        }
        let source = if notes.is_empty() {
            format!("Source: {final_url}")
        } else {
            format!("Source: {url} ({})", notes.join("; "))
        };
        if page_text.trim().is_empty() {
            return ToolOutput::ok(format!("{source}\n\n(the page has no text content)"));
        }
        match &self.answerer {
            Some(answerer) => match answerer.answer(question, &page_text).await {
                Ok(answer) => ToolOutput::ok(format!("{answer}\n\n{source}")),
                Err(e) => ToolOutput::ok(format!(
                    "[The page could not be summarised ({e}); its text follows. Answer the \
                     question from it: {question}]\n{source}\n\n{page_text}"
                )),
            },
            None => ToolOutput::ok(format!(
                "[No page answerer is configured; the page text follows. Answer the question \
                 from it: {question}]\n{source}\n\n{page_text}"
            )),
        }
    }
}

/// The first `max` characters of `text`, and whether anything was cut.
fn head_chars(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (format!("{}\n… [truncated]", &text[..at]), true),
        None => (text.to_owned(), false),
    }
}
