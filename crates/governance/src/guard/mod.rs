//! The output guard: scans a tool result after execution and before it is folded into the
//! conversation, for credentials ([`secrets`]) and prompt-injection markers
//! ([`injection`]), and produces the fields of an `output_warning` (node spec §2.2:
//! `flags`, `risk_level`, `annotations`, `output_length`, `redacted`) plus, with redaction
//! on, the text with every secret replaced by its marker.
//!
//! Flags (the original's names): `credential_leak` for any secret, refined by
//! `private_key_leak`, `connection_string_leak`, `env_file_leak`, `json_secret_leak`,
//! `url_credential_param`; `prompt_injection` for any marker, refined by `role_injection`,
//! `instruction_override`, `meta_injection`, `exfiltration_request`. Both families are
//! `high`; a clean result is `none` and produces no warning.
//!
//! The guard annotates and redacts; it never blocks. It is linear in the output (one
//! [`regex::RegexSet`] pass per family, then only the patterns that occur).

pub mod injection;
pub mod secrets;

use turnstone_proto::sse::OutputWarning;

use crate::risk::RiskLevel;
use secrets::{SecretFlag, apply_redactions, find_secrets};

/// What the guard found in one tool result.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OutputAssessment {
    pub flags: Vec<String>,
    pub risk_level: RiskLevel,
    pub annotations: Vec<String>,
    /// Length of the scanned output in characters (as the original's `len(output)`).
    pub output_length: u64,
    /// The kinds of secret found (`aws_access_key_id`, …), each once, in order of first
    /// appearance.
    pub secret_kinds: Vec<&'static str>,
    /// The output with secrets replaced, when redaction was asked for and found something.
    pub redacted_text: Option<String>,
}

impl OutputAssessment {
    /// Whether the result deserves an `output_warning`.
    pub fn is_flagged(&self) -> bool {
        !self.flags.is_empty()
    }

    /// The text to pass on: the redacted one when there is one, else the original.
    pub fn text<'a>(&'a self, original: &'a str) -> &'a str {
        self.redacted_text.as_deref().unwrap_or(original)
    }

    /// The `output_warning` event fields for this result.
    // `..default()` keeps this compiling when the wire type gains a field.
    #[allow(clippy::needless_update)]
    pub fn warning(&self, call_id: &str, func_name: &str) -> OutputWarning {
        OutputWarning {
            call_id: call_id.to_owned(),
            flags: self.flags.clone(),
            risk_level: self.risk_level.as_str().to_owned(),
            annotations: self.annotations.clone(),
            func_name: func_name.to_owned(),
            output_length: self.output_length,
            redacted: self.redacted_text.is_some(),
            ..OutputWarning::default()
        }
    }
}

/// Scans `output`; with `redact` the assessment carries the redacted text when a secret was
/// found (see the module docs).
pub fn assess_output(output: &str, redact: bool) -> OutputAssessment {
    let mut assessment = OutputAssessment {
        output_length: u64::try_from(output.chars().count()).unwrap_or(u64::MAX),
        ..OutputAssessment::default()
    };
    if output.is_empty() {
        return assessment;
    }
    let push_flag = |flags: &mut Vec<String>, flag: &str| {
        if !flags.iter().any(|f| f == flag) {
            flags.push(flag.to_owned());
        }
    };

    let injections = injection::find_injection(output);
    if !injections.is_empty() {
        push_flag(&mut assessment.flags, "prompt_injection");
        for (flag, annotation) in injections {
            push_flag(&mut assessment.flags, flag);
            assessment.annotations.push(annotation.to_owned());
        }
        assessment.risk_level = RiskLevel::High;
    }

    let found = find_secrets(output);
    if !found.is_empty() {
        push_flag(&mut assessment.flags, "credential_leak");
        let mut classes: Vec<SecretFlag> = found.iter().map(|s| s.flag).collect();
        classes.sort_unstable();
        classes.dedup();
        assessment
            .annotations
            .push(SecretFlag::Token.annotation().to_owned());
        for class in classes {
            if let Some(flag) = class.flag() {
                push_flag(&mut assessment.flags, flag);
                assessment.annotations.push(class.annotation().to_owned());
            }
        }
        for secret in &found {
            if !assessment.secret_kinds.contains(&secret.kind) {
                assessment.secret_kinds.push(secret.kind);
            }
        }
        assessment
            .annotations
            .push(format!("Detected: {}.", assessment.secret_kinds.join(", ")));
        assessment.risk_level = RiskLevel::High;
        if redact {
            assessment.redacted_text = Some(apply_redactions(output, &found));
        }
    }
    assessment
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_pattern_compiles() {
        assert!(super::secrets::all_patterns_compile());
        assert!(super::injection::all_patterns_compile());
    }

    #[test]
    fn empty_output_is_clean() {
        let assessment = super::assess_output("", true);
        assert!(!assessment.is_flagged());
        assert_eq!(assessment.output_length, 0);
        assert_eq!(assessment.risk_level, crate::RiskLevel::None);
    }
}
