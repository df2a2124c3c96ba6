//! `[judge]` of the node's config file (node spec §7.2 `judge.*`) and the intent judge the
//! engine gets from it ([`turnstone_engine::JudgeConfig`]).
//!
//! ```toml
//! [judge]
//! enabled = true                # heuristic verdicts + the async LLM tier (default on)
//! model = ""                    # "" = the workstream's model
//! provider = ""                 # "openai" | "anthropic"; "" = the workstream's client
//! base_url = ""                 # the judge's own endpoint; "" = the workstream's client
//! api_key = ""                  # the judge endpoint's key
//! confidence_threshold = 0.7    # least confidence for auto-review to run a call unasked
//! max_context_ratio = 0.5       # share of the context window the judge sees
//! timeout = 60.0                # seconds per judged call; slower = no verdict
//! read_only_tools = true        # accepted for compatibility (read-only tools are never gated)
//! output_guard = true           # scan every tool result
//! redact_secrets = true         # replace detected secrets
//! output_guard_llm = false      # ours: the judge's model also assesses flagged results
//! ```
//!
//! The judge has its own client when `base_url` is set or `provider = "anthropic"`
//! (Anthropic's public endpoint unless `base_url` says otherwise); otherwise it asks the
//! workstream's client with `model` (or the workstream's model). A workstream on a model
//! registry chain sends the chain's model whatever `model` says.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use turnstone_engine::{JudgeConfig, LlmJudge};
use turnstone_llm::{
    AnthropicConfig, AnthropicProvider, CircuitBreaker, OpenAiConfig, OpenAiProvider, Provider,
    Resilient, RetryPolicy,
};

/// `[judge]`: the governance settings the node reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeSection {
    /// `judge.enabled`. Default `true`.
    pub enabled: Option<bool>,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    /// 0–1. Default 0.7.
    pub confidence_threshold: Option<f64>,
    /// Above 0, at most 1. Default 0.5.
    pub max_context_ratio: Option<f64>,
    /// Seconds, above 0. Default 60.
    pub timeout: Option<f64>,
    /// Accepted (the original's switch to judge read-only tools too; ours never gates them).
    pub read_only_tools: Option<bool>,
    /// Scan every tool result (`judge.output_guard`). Default `true`.
    pub output_guard: Option<bool>,
    /// Replace detected secrets in tool results (`judge.redact_secrets`). Default `true`.
    pub redact_secrets: Option<bool>,
    /// Ours: the output guard's LLM tier — a result the heuristics flagged is also assessed
    /// by the judge's model, within `timeout` (`judge.output_guard_llm`). Default `false`.
    pub output_guard_llm: Option<bool>,
}

fn text(v: &Option<String>) -> &str {
    v.as_deref().map(str::trim).unwrap_or("")
}

impl JudgeSection {
    /// Range and value checks (the error names the key).
    pub fn check(&self) -> Result<(), String> {
        if let Some(t) = self.confidence_threshold
            && !(t.is_finite() && (0.0..=1.0).contains(&t))
        {
            return Err(format!(
                "[judge]: confidence_threshold must be between 0 and 1, got {t}"
            ));
        }
        if let Some(r) = self.max_context_ratio
            && !(r.is_finite() && r > 0.0 && r <= 1.0)
        {
            return Err(format!(
                "[judge]: max_context_ratio must be above 0 and at most 1, got {r}"
            ));
        }
        if let Some(t) = self.timeout
            && !(t.is_finite() && t > 0.0 && t <= 86_400.0)
        {
            return Err(format!(
                "[judge]: timeout must be above 0 seconds (at most a day), got {t}"
            ));
        }
        match text(&self.provider) {
            "" | "openai" | "anthropic" => {}
            other => {
                return Err(format!(
                    "[judge]: provider must be \"openai\" or \"anthropic\", got {other:?}"
                ));
            }
        }
        let url = text(&self.base_url);
        if !(url.is_empty() || url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "[judge]: base_url {url:?} must start with http:// or https://"
            ));
        }
        Ok(())
    }

    /// This section with the `judge.*` keys of the store's settings (`system_settings`,
    /// node spec §7.2; keyed `judge.<key>`, values as JSON) over it: a stored key wins where
    /// set, the others keep this (the config file's) value. The result is checked as the
    /// file is; a stored value of the wrong type or out of range is an error naming its key
    /// (never its value: `judge.api_key` is a secret). Keys of other sections are ignored.
    pub fn with_stored(
        &self,
        stored: &std::collections::BTreeMap<String, serde_json::Value>,
    ) -> Result<Self, String> {
        use serde_json::Value;
        let mut out = self.clone();
        for (key, value) in stored {
            let Some(name) = key.strip_prefix("judge.") else {
                continue;
            };
            let wrong = |expected: &str| format!("{key}: the stored value is not {expected}");
            let flag = || {
                value
                    .as_bool()
                    .map(Some)
                    .ok_or_else(|| wrong("true or false"))
            };
            let number = || value.as_f64().map(Some).ok_or_else(|| wrong("a number"));
            let string = || match value {
                Value::String(s) => Ok(Some(s.clone())),
                _ => Err(wrong("a string")),
            };
            match name {
                "enabled" => out.enabled = flag()?,
                "model" => out.model = string()?,
                "provider" => out.provider = string()?,
                "base_url" => out.base_url = string()?,
                "api_key" => out.api_key = string()?,
                "confidence_threshold" => out.confidence_threshold = number()?,
                "max_context_ratio" => out.max_context_ratio = number()?,
                "timeout" => out.timeout = number()?,
                "read_only_tools" => out.read_only_tools = flag()?,
                "output_guard" => out.output_guard = flag()?,
                "redact_secrets" => out.redact_secrets = flag()?,
                "output_guard_llm" => out.output_guard_llm = flag()?,
                _ => return Err(format!("{key}: unknown judge setting")),
            }
        }
        out.check()
            .map_err(|e| format!("{e} (from the stored settings)"))?;
        Ok(out)
    }

    /// The engine's judge: heuristic verdicts and the LLM tier when `enabled` (default).
    pub fn engine_judge(&self) -> Result<JudgeConfig, String> {
        self.check()?;
        let enabled = self.enabled.unwrap_or(true);
        let defaults = LlmJudge::session();
        let llm = if enabled {
            Some(LlmJudge {
                client: self.own_client()?,
                model: text(&self.model).to_string(),
                timeout: self
                    .timeout
                    .map(Duration::from_secs_f64)
                    .unwrap_or(defaults.timeout),
                max_context_ratio: self.max_context_ratio.unwrap_or(defaults.max_context_ratio),
            })
        } else {
            None
        };
        Ok(JudgeConfig {
            enabled,
            llm,
            confidence_threshold: self
                .confidence_threshold
                .unwrap_or(JudgeConfig::default().confidence_threshold),
        })
    }

    /// The judge's own client, when `base_url` or `provider = "anthropic"` asks for one.
    fn own_client(&self) -> Result<Option<Resilient>, String> {
        let url = text(&self.base_url);
        let key = Some(text(&self.api_key).to_string()).filter(|k| !k.is_empty());
        let provider: Arc<dyn Provider> = match text(&self.provider) {
            "anthropic" => {
                let mut config = AnthropicConfig {
                    api_key: key,
                    ..AnthropicConfig::default()
                };
                if !url.is_empty() {
                    config.base_url = url.to_string();
                }
                Arc::new(AnthropicProvider::new(config).map_err(|e| format!("[judge]: {e}"))?)
            }
            _ if url.is_empty() => return Ok(None),
            _ => {
                let mut config = OpenAiConfig::new(url);
                config.api_key = key;
                Arc::new(OpenAiProvider::new(config).map_err(|e| format!("[judge]: {e}"))?)
            }
        };
        // One attempt: a slow or failing judge gives no verdict, the human decides.
        Ok(Some(Resilient::new(
            provider,
            RetryPolicy::none(),
            Arc::new(CircuitBreaker::default()),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<JudgeSection, String> {
        let section: JudgeSection = toml::from_str(text).map_err(|e| e.to_string())?;
        section.check()?;
        Ok(section)
    }

    #[test]
    fn defaults_follow_the_spec() {
        let judge = JudgeSection::default().engine_judge().unwrap();
        assert!(judge.enabled);
        assert_eq!(judge.confidence_threshold, 0.7);
        let llm = judge.llm.expect("the LLM tier is on by default");
        assert!(
            llm.client.is_none() && llm.model.is_empty(),
            "the session's"
        );
        assert_eq!(llm.timeout, Duration::from_secs(60));
        assert_eq!(llm.max_context_ratio, 0.5);
    }

    #[test]
    fn keys_reach_the_engine_judge() {
        let s = parse(
            "enabled = true\nmodel = \"judge-m\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
             api_key = \"k\"\nconfidence_threshold = 0.9\nmax_context_ratio = 0.25\n\
             timeout = 2.5\nread_only_tools = true\n",
        )
        .unwrap();
        let judge = s.engine_judge().unwrap();
        assert_eq!(judge.confidence_threshold, 0.9);
        let llm = judge.llm.unwrap();
        assert!(llm.client.is_some(), "its own endpoint");
        assert_eq!(llm.model, "judge-m");
        assert_eq!(llm.timeout, Duration::from_millis(2500));
        assert_eq!(llm.max_context_ratio, 0.25);

        let off = parse("enabled = false\n").unwrap().engine_judge().unwrap();
        assert!(!off.enabled && off.llm.is_none());
    }

    #[test]
    fn stored_settings_win_over_the_file_where_set() {
        let file =
            parse("model = \"file-model\"\ntimeout = 30.0\nconfidence_threshold = 0.8\n").unwrap();
        let stored: std::collections::BTreeMap<String, serde_json::Value> = [
            ("judge.model", serde_json::json!("stored-model")),
            ("judge.base_url", serde_json::json!("http://127.0.0.1:9/v1")),
            ("judge.api_key", serde_json::json!("sk-stored")),
            ("judge.timeout", serde_json::json!(2.5)),
            ("judge.max_context_ratio", serde_json::json!(0.25)),
            ("model.name", serde_json::json!("not the judge's")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let judge = file.with_stored(&stored).unwrap().engine_judge().unwrap();
        assert_eq!(judge.confidence_threshold, 0.8, "not stored: the file's");
        let llm = judge.llm.unwrap();
        assert_eq!(llm.model, "stored-model");
        assert!(llm.client.is_some(), "the stored endpoint");
        assert_eq!(llm.timeout, Duration::from_millis(2500));
        assert_eq!(llm.max_context_ratio, 0.25);
        // Nothing stored: the file as it is.
        let same = file.with_stored(&Default::default()).unwrap();
        assert_eq!(same.model.as_deref(), Some("file-model"));
        // Off from the store: no LLM tier.
        let off = [("judge.enabled".to_string(), serde_json::json!(false))].into();
        let off = file.with_stored(&off).unwrap().engine_judge().unwrap();
        assert!(!off.enabled && off.llm.is_none());
    }

    #[test]
    fn bad_stored_values_name_their_key_and_never_the_secret() {
        for (key, value, needle) in [
            ("judge.timeout", serde_json::json!("soon"), "judge.timeout"),
            ("judge.enabled", serde_json::json!(1), "judge.enabled"),
            ("judge.api_key", serde_json::json!(42), "judge.api_key"),
            (
                "judge.confidence_threshold",
                serde_json::json!(3.0),
                "confidence_threshold",
            ),
            ("judge.provider", serde_json::json!("gemini"), "provider"),
            (
                "judge.judge_model",
                serde_json::json!("x"),
                "judge.judge_model",
            ),
        ] {
            let stored = [(key.to_string(), value)].into();
            let err = JudgeSection::default().with_stored(&stored).unwrap_err();
            assert!(err.contains(needle), "{key}: {err}");
        }
        let stored = [
            (
                "judge.api_key".to_string(),
                serde_json::json!("sk-very-secret"),
            ),
            ("judge.base_url".to_string(), serde_json::json!("ftp://x")),
        ]
        .into();
        let err = JudgeSection::default().with_stored(&stored).unwrap_err();
        assert!(!err.contains("sk-very-secret"), "{err}");
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, key) in [
            ("confidence_threshold = 1.5", "confidence_threshold"),
            ("max_context_ratio = 0.0", "max_context_ratio"),
            ("timeout = -1.0", "timeout"),
            ("provider = \"gemini\"", "provider"),
            ("base_url = \"ftp://x\"", "base_url"),
            ("judge_model = \"x\"", "judge_model"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(key), "{text}: {err}");
        }
    }
}
