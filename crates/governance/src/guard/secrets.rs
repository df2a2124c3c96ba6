//! Credential patterns of the output guard and the redaction they drive.
//!
//! Each pattern names the kind of secret it finds (`aws_access_key_id`, `github_token`, …),
//! the class of its redaction marker and the part of the match that is the secret: a
//! provider token is replaced whole, an assignment (`PASSWORD=…`, `"api_key": "…"`,
//! `Authorization: Bearer …`, `?token=…`, `user:pass@host`) keeps its name and loses only
//! the value. Markers are the original's: `[REDACTED:api_key]`, `[REDACTED:private_key]`,
//! `[REDACTED:password]`, `[REDACTED:secret]`.
//!
//! All patterns are compiled once (a `LazyLock`). Each is first run as `is_match`, which the
//! regex crate answers with a literal prefilter (`AKIA`, `ghp_`, `-----BEGIN`, …) or its
//! lazy DFA; captures are extracted only from the patterns that hit. (A `RegexSet`
//! pre-filter over all patterns measured no faster on a 4 MiB build log, and the per-pattern
//! `is_match` keeps each pattern's literal prefilter.) Word boundaries are ASCII
//! (`(?-u:\b)`), which keeps the DFA usable on non-ASCII text. Cost is linear: an
//! unoptimised test build scans about 3 s per MiB of build log (the regex crates at
//! opt-level 0); optimised builds are many times faster.

use std::sync::LazyLock;

use regex::{Captures, Regex};

/// The class of a redaction marker: `[REDACTED:<label>]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RedactionLabel {
    ApiKey,
    PrivateKey,
    Password,
    Secret,
}

impl RedactionLabel {
    pub fn marker(self) -> &'static str {
        match self {
            Self::ApiKey => "[REDACTED:api_key]",
            Self::PrivateKey => "[REDACTED:private_key]",
            Self::Password => "[REDACTED:password]",
            Self::Secret => "[REDACTED:secret]",
        }
    }
}

/// How a match becomes the span to redact.
#[derive(Clone, Copy)]
enum Span {
    /// The whole match.
    Whole,
    /// One capture group (the value of an assignment).
    Group(usize),
    /// Capture group 2 (the value), kept only when `check(group 1 = name, group 2 = value)`.
    Checked(fn(&str, &str) -> bool),
}

/// Which output-guard flag, besides `credential_leak`, a pattern raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum SecretFlag {
    /// Only `credential_leak`.
    Token,
    PrivateKey,
    ConnectionString,
    EnvFile,
    JsonSecret,
    UrlParameter,
}

impl SecretFlag {
    pub(crate) fn flag(self) -> Option<&'static str> {
        match self {
            Self::Token => None,
            Self::PrivateKey => Some("private_key_leak"),
            Self::ConnectionString => Some("connection_string_leak"),
            Self::EnvFile => Some("env_file_leak"),
            Self::JsonSecret => Some("json_secret_leak"),
            Self::UrlParameter => Some("url_credential_param"),
        }
    }

    pub(crate) fn annotation(self) -> &'static str {
        match self {
            Self::Token => "Output contains what appears to be an API key or token.",
            Self::PrivateKey => "Output contains a PEM-encoded private key block.",
            Self::ConnectionString => {
                "Output contains a connection string with embedded credentials."
            }
            Self::EnvFile => "Output contains .env-style assignments with secret-bearing keys.",
            Self::JsonSecret => {
                "Output contains JSON with secret-bearing keys (api_key, password, token, etc.)."
            }
            Self::UrlParameter => "Output contains URLs with credential-bearing query parameters.",
        }
    }
}

struct SecretPattern {
    /// What the secret is, for annotations and tests.
    kind: &'static str,
    label: RedactionLabel,
    flag: SecretFlag,
    regex: &'static str,
    span: Span,
}

const fn token(kind: &'static str, regex: &'static str) -> SecretPattern {
    SecretPattern {
        kind,
        label: RedactionLabel::ApiKey,
        flag: SecretFlag::Token,
        regex,
        span: Span::Whole,
    }
}

const fn value(
    kind: &'static str,
    label: RedactionLabel,
    flag: SecretFlag,
    regex: &'static str,
) -> SecretPattern {
    SecretPattern {
        kind,
        label,
        flag,
        regex,
        span: Span::Group(1),
    }
}

const fn checked(
    kind: &'static str,
    flag: SecretFlag,
    regex: &'static str,
    check: fn(&str, &str) -> bool,
) -> SecretPattern {
    SecretPattern {
        kind,
        label: RedactionLabel::Secret,
        flag,
        regex,
        span: Span::Checked(check),
    }
}

/// Every credential the guard knows. Order does not matter: overlapping finds are merged.
const PATTERNS: &[SecretPattern] = &[
    // Key material.
    SecretPattern {
        kind: "private_key",
        label: RedactionLabel::PrivateKey,
        flag: SecretFlag::PrivateKey,
        // A key cut off by truncation (no END line) is redacted to the end of the text.
        regex: r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)",
        span: Span::Whole,
    },
    token(
        "putty_private_key",
        r"PuTTY-User-Key-File-[0-9]:[\s\S]*?Private-MAC:\s*[0-9a-fA-F]+",
    ),
    token("age_secret_key", r"AGE-SECRET-KEY-1[0-9A-Z]{58}"),
    // Cloud providers.
    token(
        "aws_access_key_id",
        r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b",
    ),
    value(
        "aws_secret_access_key",
        RedactionLabel::Secret,
        SecretFlag::EnvFile,
        r#"(?i)aws_?secret_?(?:access_?)?key["']?\s*[:=]\s*["']?([A-Za-z0-9/+=]{40})"#,
    ),
    value(
        "aws_session_token",
        RedactionLabel::Secret,
        SecretFlag::EnvFile,
        r#"(?i)aws_?session_?token["']?\s*[:=]\s*["']?([A-Za-z0-9/+=]{100,})"#,
    ),
    token("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}"),
    token("google_oauth_client_secret", r"\bGOCSPX-[A-Za-z0-9_-]{20,}"),
    token("google_oauth_access_token", r"\bya29\.[0-9A-Za-z_-]{20,}"),
    token("google_refresh_token", r"\b1//0[0-9A-Za-z_-]{30,}"),
    value(
        "azure_storage_key",
        RedactionLabel::Secret,
        SecretFlag::ConnectionString,
        r"(?i)\b(?:AccountKey|SharedAccessKey|SharedSecret)\s*=\s*([A-Za-z0-9+/=]{20,})",
    ),
    token(
        "azure_client_secret",
        r"\b[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}",
    ),
    token("digitalocean_token", r"\bdo[por]_v1_[a-f0-9]{64}\b"),
    // AI providers.
    token(
        "anthropic_api_key",
        r"\bsk-ant-[a-z0-9]{2,10}-[A-Za-z0-9_-]{20,}",
    ),
    token(
        "openai_project_key",
        r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}",
    ),
    token("openrouter_api_key", r"\bsk-or-v1-[A-Za-z0-9]{32,}"),
    token("openai_style_api_key", r"\bsk-[A-Za-z0-9]{20,}\b"),
    token("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}\b"),
    token("groq_api_key", r"\bgsk_[A-Za-z0-9]{40,}\b"),
    token("xai_api_key", r"\bxai-[A-Za-z0-9]{40,}\b"),
    token("replicate_token", r"\br8_[A-Za-z0-9]{30,}\b"),
    token("perplexity_api_key", r"\bpplx-[A-Za-z0-9]{40,}\b"),
    // Code hosting and CI.
    token(
        "github_token",
        r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b",
    ),
    token(
        "github_fine_grained_token",
        r"\bgithub_pat_[A-Za-z0-9_]{40,255}",
    ),
    token(
        "gitlab_token",
        r"\bgl(?:pat|dt|rt|ptt|cbt|oas|ft|imt|soat|agent)-[A-Za-z0-9_-]{20,}",
    ),
    token("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    token("pypi_token", r"\bpypi-AgE[A-Za-z0-9_-]{50,}"),
    token("docker_hub_token", r"\bdckr_pat_[A-Za-z0-9_-]{20,}"),
    token("vault_token", r"\bhv[sbr]\.[A-Za-z0-9_-]{24,}"),
    token("atlassian_token", r"\bATATT3[A-Za-z0-9_=-]{50,}"),
    token("linear_api_key", r"\blin_api_[A-Za-z0-9]{40}\b"),
    token("notion_token", r"\b(?:secret_|ntn_)[A-Za-z0-9]{40,}\b"),
    // Messaging and payments.
    token("slack_token", r"\bxox[abposre]-[A-Za-z0-9-]{10,}"),
    token("slack_app_token", r"\bxapp-[0-9]-[A-Za-z0-9-]{10,}"),
    token(
        "slack_webhook",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{20,}",
    ),
    token(
        "discord_webhook",
        r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_-]{20,}",
    ),
    token("telegram_bot_token", r"\b[0-9]{8,10}:AA[A-Za-z0-9_-]{33}"),
    token(
        "stripe_secret_key",
        r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b",
    ),
    token("stripe_webhook_secret", r"\bwhsec_[A-Za-z0-9]{24,}\b"),
    token(
        "sendgrid_api_key",
        r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",
    ),
    token("twilio_api_key", r"\bSK[0-9a-fA-F]{32}\b"),
    token("mailgun_api_key", r"\bkey-[0-9a-zA-Z]{32}\b"),
    token("shopify_token", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"),
    token("square_token", r"\bsq0(?:atp|csp)-[0-9A-Za-z_-]{22,}"),
    // Generic shapes.
    token(
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
    ),
    value(
        "authorization_header",
        RedactionLabel::ApiKey,
        SecretFlag::Token,
        r"(?i)\b(?:proxy-)?authorization\s*[:=]\s*(?:bearer|basic|token|bot|digest|apikey|sso-key|negotiate)\s+([A-Za-z0-9._~+/=:-]{8,})",
    ),
    value(
        "bearer_token",
        RedactionLabel::ApiKey,
        SecretFlag::Token,
        r"(?i)\bbearer\s+([A-Za-z0-9._~+/=-]{20,})",
    ),
    value(
        "api_key_header",
        RedactionLabel::Secret,
        SecretFlag::Token,
        r"(?i)\b(?:x-api-key|api-key|x-auth-token|private-token|x-goog-api-key|x-amz-security-token|x-vault-token|x-access-token|x-csrf-token)\s*:\s*([^\s]{8,})",
    ),
    value(
        "cookie_header",
        RedactionLabel::Secret,
        SecretFlag::Token,
        r"(?im)^\s*(?:set-)?cookie\s*:\s*([^\r\n]{8,})",
    ),
    value(
        "url_password",
        RedactionLabel::Password,
        SecretFlag::ConnectionString,
        r#"(?i)\b[a-z][a-z0-9+.-]{1,20}://[^/\s:@'"<>]{1,256}:([^@\s/'"<>]{1,256})@"#,
    ),
    value(
        "url_secret_parameter",
        RedactionLabel::Secret,
        SecretFlag::UrlParameter,
        r#"(?i)[?&](?:access_token|refresh_token|id_token|token|api_key|apikey|api-key|key|secret|client_secret|password|passwd|pwd|sig|signature|auth|x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature)=([^&\s#"'<>]{12,})"#,
    ),
    checked(
        "env_assignment",
        SecretFlag::EnvFile,
        r#"(?m)(?:^|[\s;'"(`])(?:export\s+)?([A-Z][A-Z0-9_]*)[ \t]*[=:][ \t]*("[^"\r\n]*"|'[^'\r\n]*'|[^\s"']+)"#,
        env_secret,
    ),
    checked(
        "config_assignment",
        SecretFlag::EnvFile,
        r#"(?mi)^[ \t]*(?:\d+\t[ \t]*)?(?:export[ \t]+)?["']?([a-z0-9_.-]*(?:secret|password|passwd|pwd|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|auth|credential)[a-z0-9_.-]*)["']?[ \t]*[=:][ \t]*("[^"\r\n]*"|'[^'\r\n]*'|[^\s#;,]+)"#,
        config_secret,
    ),
    checked(
        "json_secret",
        SecretFlag::JsonSecret,
        r#"(?i)["']((?:[a-z0-9_]*_)?(?:api_?key|apikey|api_secret|secret_key|secret|password|passwd|token|access_token|refresh_token|id_token|auth_token|private_key|private_key_id|client_secret|webhook_secret|signing_key|encryption_key|session_token|bearer_token|secret_access_key|access_key_secret|connection_string))["']\s*:\s*("[^"]{8,}"|'[^']{8,}')"#,
        json_secret,
    ),
];

/// Components of an upper-case variable name that make its value a secret.
const SECRET_NAME_PARTS: &[&str] = &[
    "SECRET",
    "SECRETS",
    "TOKEN",
    "TOKENS",
    "PASSWORD",
    "PASSWORDS",
    "PASSWD",
    "PASS",
    "PWD",
    "CREDENTIAL",
    "CREDENTIALS",
    "DSN",
    "KEY",
    "APIKEY",
    "PRIVATEKEY",
    "SALT",
    "SIGNATURE",
];

/// `PASSWORD=hunter2`, `AWS_SECRET_ACCESS_KEY=…`, `DATABASE_URL=…` — but not `SORT_KEY=id`,
/// `PUBLIC_KEY=…`, `TOKEN_LIMIT=4096` or a reference like `API_KEY=$API_KEY`.
fn env_secret(name: &str, value: &str) -> bool {
    let parts: Vec<&str> = name.split('_').collect();
    let named = parts.iter().any(|p| SECRET_NAME_PARTS.contains(p))
        || matches!(
            name,
            "DATABASE_URL"
                | "DB_URL"
                | "TURNSTONE_DB_URL"
                | "REDIS_URL"
                | "MONGO_URL"
                | "MONGODB_URI"
        );
    let harmless = parts.iter().any(|p| {
        matches!(
            *p,
            "PUBLIC"
                | "PUB"
                | "FILE"
                | "PATH"
                | "ID"
                | "NAME"
                | "TYPE"
                | "LIMIT"
                | "COUNT"
                | "LENGTH"
                | "SIZE"
                | "MAX"
                | "MIN"
                | "TTL"
                | "EXPIRY"
                | "HEADER"
                | "PREFIX"
                | "FIELD"
                | "ENV"
                | "URL"
                | "URI"
                | "HOST"
                | "PORT"
                | "USER"
                | "USERNAME"
                | "DIR"
                | "ENABLED"
                | "REQUIRED"
                | "ALGORITHM"
                | "FORMAT"
                | "VERSION"
        )
    }) && !matches!(
        name,
        "DATABASE_URL" | "DB_URL" | "TURNSTONE_DB_URL" | "REDIS_URL" | "MONGO_URL" | "MONGODB_URI"
    );
    named && !harmless && plausible_value(value, 4)
}

/// Line-start `password = …` / `api_key: …` in INI, YAML, TOML and properties files (also
/// after a `cat -n` line number, as `read_file` shows files); the value must look like a
/// secret, not code (`password = request.form`).
fn config_secret(name: &str, value: &str) -> bool {
    let name = name.to_ascii_lowercase();
    let harmless_suffix = [
        "_file",
        "_path",
        "_id",
        "_name",
        "_type",
        "_length",
        "_count",
        "_estimate",
        "_limit",
        "_expiry",
        "_ttl",
        "_endpoint",
        "_header",
        "_prefix",
        "_uri",
        "_url",
        "_env",
        "_enabled",
        "_required",
        "_max",
        "_min",
        "_size",
        "_format",
        "_field",
        "_version",
        "_dir",
        "_mode",
        "_method",
        "_policy",
        "_timeout",
        "s_per_minute",
    ];
    if name.contains("author")
        || name.contains("tokenizer")
        || harmless_suffix.iter().any(|s| name.ends_with(s))
        || name.starts_with("max_")
        || name.starts_with("min_")
        || name.starts_with("num_")
    {
        return false;
    }
    let v = unquote(value);
    if !plausible_value(value, 8) || v.contains(['(', ')', '{', '}', '[', ']', '<', '>', ' ']) {
        return false;
    }
    let dotted_identifier = v.split('.').count() > 1
        && v.split('.').all(|p| {
            !p.is_empty()
                && p.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
    let constant_name = v.contains('_') && v.chars().all(|c| c.is_ascii_uppercase() || c == '_');
    let looks_random = v.chars().any(|c| c.is_ascii_digit())
        || v.chars().count() >= 16
        || v.contains(['+', '/', '=', '!', '@', '#', '%', '^', '&', '*', '~']);
    !dotted_identifier && !constant_name && looks_random
}

/// `"password": "…"` in JSON or a Python dict.
fn json_secret(_name: &str, value: &str) -> bool {
    plausible_value(value, 8)
}

fn unquote(value: &str) -> &str {
    let v = value.trim();
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|s| s.strip_suffix(q)) {
            return inner;
        }
    }
    v
}

/// Not empty, not a reference to something else (`$VAR`, `${VAR}`, `%VAR%`, `<token>`),
/// not a mask or an already-redacted value, not a literal like `true`/`null`.
fn plausible_value(value: &str, min_chars: usize) -> bool {
    let v = unquote(value);
    if v.chars().count() < min_chars
        || v.starts_with('$')
        || v.contains("${")
        || v.contains("$(")
        || v.starts_with('%')
        || v.starts_with("[REDACTED")
        || v.starts_with('<')
        || v.starts_with("{{")
    {
        return false;
    }
    let first = v.chars().next().unwrap_or('*');
    let masked =
        v.chars().all(|c| c == first) && matches!(first, '*' | 'x' | 'X' | '.' | '-' | '#' | '•');
    let literal = matches!(
        v.to_ascii_lowercase().as_str(),
        "true"
            | "false"
            | "null"
            | "none"
            | "undefined"
            | "required"
            | "optional"
            | "string"
            | "redacted"
            | "<redacted>"
            | "********"
    );
    !masked && !literal
}

struct Compiled {
    regexes: Vec<Regex>,
}

/// `\b` written in [`PATTERNS`] is the ASCII word boundary.
fn ascii_boundaries(pattern: &str) -> String {
    pattern.replace(r"\b", r"(?-u:\b)")
}

static COMPILED: LazyLock<Option<Compiled>> = LazyLock::new(|| {
    let regexes = PATTERNS
        .iter()
        .map(|p| Regex::new(&ascii_boundaries(p.regex)))
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    Some(Compiled { regexes })
});

/// Whether every pattern compiled (a unit test holds the table to that).
#[cfg(test)]
pub(crate) fn all_patterns_compile() -> bool {
    COMPILED
        .as_ref()
        .is_some_and(|c| c.regexes.len() == PATTERNS.len())
}

/// One secret found in a text: its byte span, its kind and marker class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretMatch {
    pub start: usize,
    pub end: usize,
    pub kind: &'static str,
    pub label: RedactionLabel,
    pub(crate) flag: SecretFlag,
}

/// Every secret in `text`, sorted by position, overlapping finds merged (the earliest
/// find's kind names the merged span).
pub fn find_secrets(text: &str) -> Vec<SecretMatch> {
    let Some(compiled) = COMPILED.as_ref() else {
        return Vec::new();
    };
    let markers = marker_spans(text);
    let mut found = Vec::new();
    for (pattern, regex) in PATTERNS.iter().zip(&compiled.regexes) {
        // `is_match` runs on the regex's literal prefilter or DFA; captures only on a hit.
        if !regex.is_match(text) {
            continue;
        }
        for caps in regex.captures_iter(text) {
            if let Some((start, end)) = span_of(pattern.span, &caps) {
                // An earlier redaction is not a secret: redacting twice changes nothing.
                let inside_marker = markers.iter().any(|&(ms, me)| start < me && ms < end);
                if start < end && !inside_marker {
                    found.push(SecretMatch {
                        start,
                        end,
                        kind: pattern.kind,
                        label: pattern.label,
                        flag: pattern.flag,
                    });
                }
            }
        }
    }
    found.sort_by_key(|m| (m.start, std::cmp::Reverse(m.end)));
    let mut merged: Vec<SecretMatch> = Vec::with_capacity(found.len());
    for m in found {
        match merged.last_mut() {
            Some(last) if m.start < last.end => {
                last.end = last.end.max(m.end);
                // A private key swallows whatever it overlaps; keep its marker.
                if m.label == RedactionLabel::PrivateKey {
                    last.label = RedactionLabel::PrivateKey;
                }
            }
            _ => merged.push(m),
        }
    }
    merged
}

/// The byte spans of markers already in `text` (`[REDACTED:<label>]`).
fn marker_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(offset) = text[from..].find("[REDACTED:") {
        let start = from + offset;
        let end = text[start..]
            .find(']')
            .map_or(text.len(), |close| start + close + 1);
        spans.push((start, end));
        from = end.max(start + 1);
    }
    spans
}

fn span_of(span: Span, caps: &Captures<'_>) -> Option<(usize, usize)> {
    match span {
        Span::Whole => caps.get(0).map(|m| (m.start(), m.end())),
        Span::Group(n) => caps.get(n).map(|m| (m.start(), m.end())),
        Span::Checked(check) => {
            let name = caps.get(1)?;
            let value = caps.get(2)?;
            if !check(name.as_str(), value.as_str()) {
                return None;
            }
            // A quoted value keeps its quotes, so JSON and shell syntax stay valid.
            let text = value.as_str();
            let quoted = text.len() >= 2
                && (text.starts_with('"') && text.ends_with('"')
                    || text.starts_with('\'') && text.ends_with('\''));
            Some(if quoted {
                (value.start() + 1, value.end() - 1)
            } else {
                (value.start(), value.end())
            })
        }
    }
}

/// `text` with every span of `secrets` (from [`find_secrets`] on the same text) replaced by
/// its marker.
pub fn apply_redactions(text: &str, secrets: &[SecretMatch]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut cursor = 0;
    for secret in secrets {
        if secret.start < cursor
            || secret.end > text.len()
            || !text.is_char_boundary(secret.start)
            || !text.is_char_boundary(secret.end)
        {
            continue;
        }
        out.push_str(&text[cursor..secret.start]);
        out.push_str(secret.label.marker());
        cursor = secret.end;
    }
    out.push_str(&text[cursor..]);
    out
}

/// `text` with every secret replaced by its marker (the redaction alone, without the rest
/// of the assessment; for error messages, audit details and logs).
pub fn redact_secrets(text: &str) -> String {
    apply_redactions(text, &find_secrets(text))
}

/// The kinds the table knows, in table order (for tests and docs).
pub fn known_kinds() -> Vec<&'static str> {
    PATTERNS.iter().map(|p| p.kind).collect()
}
