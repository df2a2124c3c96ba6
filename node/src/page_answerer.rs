//! `web_fetch`'s answering step on the node's own model: the question and the page text go
//! to the model in a fresh, tool-less request; only its answer returns to the conversation.

use async_trait::async_trait;
use turnstone_llm::{ChatMessage, ChatRequest, Resilient};
use turnstone_tools::PageAnswerer;

/// Answers from a page with `model` on `llm`.
pub struct LlmPageAnswerer {
    pub llm: Resilient,
    pub model: String,
}

impl std::fmt::Debug for LlmPageAnswerer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmPageAnswerer")
            .field("model", &self.model)
            .finish()
    }
}

const INSTRUCTIONS: &str = "You answer a question using only the web page text you are given. \
Quote exact figures, names and code from the page. If the page does not contain the answer, \
say so plainly and summarise what the page does contain. Be concise.";

/// The request sent for one question (separate so tests can see exactly what goes out).
pub fn answer_request(model: &str, question: &str, page: &str) -> ChatRequest {
    ChatRequest {
        model: model.to_string(),
        messages: vec![
            ChatMessage::system(INSTRUCTIONS),
            ChatMessage::user(format!("Question: {question}\n\nPage text:\n{page}")),
        ]
        .into(),
        temperature: Some(0.0),
        max_tokens: Some(2048),
        ..ChatRequest::default()
    }
}

#[async_trait]
impl PageAnswerer for LlmPageAnswerer {
    async fn answer(&self, question: &str, page: &str) -> Result<String, String> {
        let reply = self
            .llm
            .complete(&answer_request(&self.model, question, page))
            .await
            .map_err(|e| format!("the model could not answer from the page: {e}"))?;
        let text = reply.content.trim().to_string();
        if text.is_empty() {
            return Err("the model returned an empty answer".into());
        }
        Ok(text)
    }
}
