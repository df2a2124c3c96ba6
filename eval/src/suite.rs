//! The suite file: cases (a prompt or a multi-turn task, fixture files, checks) and the
//! settings they run under, read from TOML (`.toml`) or JSON (anything else).
//!
//! The file is read in two steps so that every mistake names its field: the whole file into
//! a JSON value, then each section, case and check on its own with its path
//! (`cases[2].checks[0].pattern`). Values serde cannot judge (an empty prompt, a regex that
//! does not compile, a fixture path leaving the workspace, a threshold above 1) are checked
//! after, with the same paths.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use regex::Regex;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Per-case time limit when neither the case nor `[defaults]` gives one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Most model requests per turn when neither the case nor `[defaults]` gives a number.
pub const DEFAULT_MAX_TURNS: u32 = 10;

/// Why a suite file was refused.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("{file}: cannot read: {message}")]
    Read { file: String, message: String },
    #[error("{file}: not valid {format}: {message}")]
    Syntax {
        file: String,
        format: &'static str,
        message: String,
    },
    /// A field is missing, unknown, of the wrong type or has a bad value.
    #[error("{file}: {field}: {message}")]
    Field {
        file: String,
        field: String,
        message: String,
    },
}

/// What a case's tool calls may do without a human.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    /// Every tool call runs (inside the case's throwaway workspace).
    #[default]
    Auto,
    /// Only tools that need no approval run (reads inside the workspace, searches, …);
    /// every other call is denied, and the model sees the denial as the tool's result.
    Deny,
}

/// One check of a case's outcome.
#[derive(Debug, Clone)]
pub enum Check {
    /// The final reply equals `value` (both trimmed unless `trim = false`).
    Exact { value: String, trim: bool },
    /// The final reply contains `value`.
    Contains { value: String, ignore_case: bool },
    /// The final reply does not contain `value`.
    NotContains { value: String, ignore_case: bool },
    /// The final reply matches `pattern`.
    Regex { pattern: Regex },
    /// The model called `tool` (at least `min` times, at most `max`), with arguments whose
    /// named values match the regexes of `args` (strings as they are, other values as JSON).
    ToolCalled {
        tool: String,
        args: BTreeMap<String, Regex>,
        min: usize,
        max: Option<usize>,
    },
    /// The model never called `tool`.
    ToolNotCalled { tool: String },
    /// After the case, the workspace file `path` exists and (when given) its text contains
    /// `contains` and matches `regex`.
    File {
        path: PathBuf,
        contains: Option<String>,
        regex: Option<Regex>,
    },
    /// The judge model decides whether the outcome meets `criteria`.
    Judge { criteria: String },
}

impl Check {
    /// The check's `type` as written in the suite.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Exact { .. } => "exact",
            Self::Contains { .. } => "contains",
            Self::NotContains { .. } => "not_contains",
            Self::Regex { .. } => "regex",
            Self::ToolCalled { .. } => "tool_called",
            Self::ToolNotCalled { .. } => "tool_not_called",
            Self::File { .. } => "file",
            Self::Judge { .. } => "judge",
        }
    }
}

/// One case: the user messages it sends, the files its workspace starts with, its checks
/// and limits.
#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    /// The user messages, one turn each (a `prompt` is one turn).
    pub turns: Vec<String>,
    /// Workspace-relative path → content.
    pub files: BTreeMap<PathBuf, String>,
    pub checks: Vec<Check>,
    pub timeout: Duration,
    pub max_turns: u32,
    pub approval: Approval,
}

/// The judge model of `judge` checks, as the suite names it (flags win over it).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeSection {
    pub provider: Option<String>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    /// The environment variable holding the judge's API key (`X` or `X_FILE`).
    pub api_key_env: Option<String>,
}

/// A whole suite.
#[derive(Debug, Clone)]
pub struct Suite {
    pub name: String,
    /// Least share of passing cases (0–1) a run must reach; default 1 (every case).
    pub threshold: f64,
    /// System prompt of variants that give none.
    pub system_prompt: Option<String>,
    pub judge: JudgeSection,
    pub cases: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    name: Option<String>,
    description: Option<String>,
    threshold: Option<f64>,
    system_prompt: Option<String>,
    #[serde(default)]
    defaults: Value,
    #[serde(default)]
    judge: Value,
    cases: Vec<Value>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DefaultsFile {
    timeout_secs: Option<u64>,
    max_turns: Option<u32>,
    approval: Option<Approval>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    id: String,
    prompt: Option<String>,
    turns: Option<Vec<String>>,
    #[serde(default)]
    files: BTreeMap<String, String>,
    #[serde(default)]
    checks: Vec<Value>,
    timeout_secs: Option<u64>,
    max_turns: Option<u32>,
    approval: Option<Approval>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum CheckFile {
    Exact {
        value: String,
        #[serde(default = "yes")]
        trim: bool,
    },
    Contains {
        value: String,
        #[serde(default)]
        ignore_case: bool,
    },
    NotContains {
        value: String,
        #[serde(default)]
        ignore_case: bool,
    },
    Regex {
        pattern: String,
    },
    ToolCalled {
        tool: String,
        #[serde(default)]
        args: BTreeMap<String, String>,
        min: Option<usize>,
        max: Option<usize>,
    },
    ToolNotCalled {
        tool: String,
    },
    File {
        path: String,
        contains: Option<String>,
        regex: Option<String>,
    },
    Judge {
        criteria: String,
    },
}

fn yes() -> bool {
    true
}

impl Suite {
    /// Reads and checks the suite at `path` (TOML when it ends in `.toml`, else JSON).
    pub fn load(path: &Path) -> Result<Self, SuiteError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| SuiteError::Read {
            file: file.clone(),
            message: e.to_string(),
        })?;
        let toml = path.extension().is_some_and(|e| e == "toml");
        Self::parse(&text, toml, &file)
    }

    /// Parses suite text; `file` names it in errors.
    pub fn parse(text: &str, toml: bool, file: &str) -> Result<Self, SuiteError> {
        let value: Value = if toml {
            let table: toml::Table = toml::from_str(text).map_err(|e| SuiteError::Syntax {
                file: file.to_string(),
                format: "TOML",
                message: e.message().to_string(),
            })?;
            serde_json::to_value(table).map_err(|e| SuiteError::Syntax {
                file: file.to_string(),
                format: "TOML",
                message: e.to_string(),
            })?
        } else {
            serde_json::from_str(text).map_err(|e| SuiteError::Syntax {
                file: file.to_string(),
                format: "JSON",
                message: e.to_string(),
            })?
        };
        Parser { file }.suite(value)
    }
}

struct Parser<'a> {
    file: &'a str,
}

impl Parser<'_> {
    fn error(&self, field: impl Into<String>, message: impl Into<String>) -> SuiteError {
        SuiteError::Field {
            file: self.file.to_string(),
            field: field.into(),
            message: message.into(),
        }
    }

    /// `value` as a `T`; serde's message (which names a missing or unknown key) under `at`.
    fn section<T: DeserializeOwned>(&self, at: &str, value: Value) -> Result<T, SuiteError> {
        serde_json::from_value(value).map_err(|e| self.error(at, e.to_string()))
    }

    fn suite(&self, value: Value) -> Result<Suite, SuiteError> {
        if !value.is_object() {
            return Err(self.error("(top level)", "expected a table of suite settings"));
        }
        let raw: SuiteFile = self.section("(top level)", value)?;
        let _ = raw.description;
        let defaults: DefaultsFile = if raw.defaults.is_null() {
            DefaultsFile::default()
        } else {
            self.section("defaults", raw.defaults)?
        };
        let judge: JudgeSection = if raw.judge.is_null() {
            JudgeSection::default()
        } else {
            self.section("judge", raw.judge)?
        };
        let threshold = raw.threshold.unwrap_or(1.0);
        if !(0.0..=1.0).contains(&threshold) {
            return Err(self.error(
                "threshold",
                format!("{threshold} is not a share of cases between 0 and 1"),
            ));
        }
        if defaults.timeout_secs == Some(0) {
            return Err(self.error("defaults.timeout_secs", "must be at least 1"));
        }
        if defaults.max_turns == Some(0) {
            return Err(self.error("defaults.max_turns", "must be at least 1"));
        }
        if raw.cases.is_empty() {
            return Err(self.error("cases", "the suite has no cases"));
        }
        let mut cases = Vec::with_capacity(raw.cases.len());
        let mut seen = std::collections::BTreeSet::new();
        for (i, case) in raw.cases.into_iter().enumerate() {
            let at = format!("cases[{i}]");
            let case = self.case(&at, case, &defaults)?;
            if !seen.insert(case.id.clone()) {
                return Err(self.error(
                    format!("{at}.id"),
                    format!("`{}` is the id of an earlier case too", case.id),
                ));
            }
            cases.push(case);
        }
        Ok(Suite {
            name: raw.name.unwrap_or_else(|| {
                Path::new(self.file)
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "suite".into())
            }),
            threshold,
            system_prompt: raw.system_prompt.filter(|s| !s.trim().is_empty()),
            judge,
            cases,
        })
    }

    fn case(&self, at: &str, value: Value, defaults: &DefaultsFile) -> Result<Case, SuiteError> {
        let raw: CaseFile = self.section(at, value)?;
        if raw.id.trim().is_empty() {
            return Err(self.error(format!("{at}.id"), "must not be empty"));
        }
        let turns = match (raw.prompt, raw.turns) {
            (Some(_), Some(_)) => {
                return Err(self.error(
                    format!("{at}.prompt"),
                    "give `prompt` (one turn) or `turns` (several), not both",
                ));
            }
            (None, None) => {
                return Err(self.error(
                    format!("{at}.prompt"),
                    "missing: give `prompt` (one turn) or `turns` (several)",
                ));
            }
            (Some(prompt), None) => vec![prompt],
            (None, Some(turns)) => turns,
        };
        if turns.is_empty() {
            return Err(self.error(format!("{at}.turns"), "must list at least one message"));
        }
        if let Some(i) = turns.iter().position(|t| t.trim().is_empty()) {
            let field = if turns.len() == 1 {
                format!("{at}.prompt")
            } else {
                format!("{at}.turns[{i}]")
            };
            return Err(self.error(field, "must not be empty"));
        }
        let mut files = BTreeMap::new();
        for (path, content) in raw.files {
            let field = format!("{at}.files.\"{path}\"");
            files.insert(self.workspace_path(&field, &path)?, content);
        }
        let mut checks = Vec::with_capacity(raw.checks.len());
        for (i, check) in raw.checks.into_iter().enumerate() {
            checks.push(self.check(&format!("{at}.checks[{i}]"), check)?);
        }
        if checks.is_empty() {
            return Err(self.error(format!("{at}.checks"), "a case needs at least one check"));
        }
        let timeout_secs = raw
            .timeout_secs
            .or(defaults.timeout_secs)
            .unwrap_or(DEFAULT_TIMEOUT.as_secs());
        if timeout_secs == 0 {
            return Err(self.error(format!("{at}.timeout_secs"), "must be at least 1"));
        }
        let max_turns = raw
            .max_turns
            .or(defaults.max_turns)
            .unwrap_or(DEFAULT_MAX_TURNS);
        if max_turns == 0 {
            return Err(self.error(format!("{at}.max_turns"), "must be at least 1"));
        }
        Ok(Case {
            id: raw.id,
            turns,
            files,
            checks,
            timeout: Duration::from_secs(timeout_secs),
            max_turns,
            approval: raw.approval.or(defaults.approval).unwrap_or_default(),
        })
    }

    fn check(&self, at: &str, value: Value) -> Result<Check, SuiteError> {
        if value.get("type").is_none() {
            return Err(self.error(
                format!("{at}.type"),
                "missing: one of exact, contains, not_contains, regex, tool_called, \
                 tool_not_called, file, judge",
            ));
        }
        let raw: CheckFile = self.section(at, value)?;
        let regex = |field: &str, pattern: &str| {
            Regex::new(pattern).map_err(|e| self.error(format!("{at}.{field}"), e.to_string()))
        };
        let non_empty = |field: &str, text: &str| {
            if text.is_empty() {
                Err(self.error(format!("{at}.{field}"), "must not be empty"))
            } else {
                Ok(())
            }
        };
        Ok(match raw {
            CheckFile::Exact { value, trim } => Check::Exact { value, trim },
            CheckFile::Contains { value, ignore_case } => {
                non_empty("value", &value)?;
                Check::Contains { value, ignore_case }
            }
            CheckFile::NotContains { value, ignore_case } => {
                non_empty("value", &value)?;
                Check::NotContains { value, ignore_case }
            }
            CheckFile::Regex { pattern } => Check::Regex {
                pattern: regex("pattern", &pattern)?,
            },
            CheckFile::ToolCalled {
                tool,
                args,
                min,
                max,
            } => {
                non_empty("tool", &tool)?;
                let mut compiled = BTreeMap::new();
                for (name, pattern) in args {
                    let re = regex(&format!("args.{name}"), &pattern)?;
                    compiled.insert(name, re);
                }
                let min = min.unwrap_or(1);
                if let Some(max) = max
                    && max < min
                {
                    return Err(
                        self.error(format!("{at}.max"), format!("{max} is below min ({min})"))
                    );
                }
                Check::ToolCalled {
                    tool,
                    args: compiled,
                    min,
                    max,
                }
            }
            CheckFile::ToolNotCalled { tool } => {
                non_empty("tool", &tool)?;
                Check::ToolNotCalled { tool }
            }
            CheckFile::File {
                path,
                contains,
                regex: pattern,
            } => Check::File {
                path: self.workspace_path(&format!("{at}.path"), &path)?,
                contains,
                regex: pattern.map(|p| regex("regex", &p)).transpose()?,
            },
            CheckFile::Judge { criteria } => {
                if criteria.trim().is_empty() {
                    return Err(self.error(format!("{at}.criteria"), "must not be empty"));
                }
                Check::Judge { criteria }
            }
        })
    }

    /// A relative path that stays inside the workspace.
    fn workspace_path(&self, field: &str, path: &str) -> Result<PathBuf, SuiteError> {
        let p = Path::new(path);
        let inside = !path.is_empty()
            && p.components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if inside {
            Ok(p.to_path_buf())
        } else {
            Err(self.error(
                field,
                "must be a relative path inside the case's workspace (no `..`, not absolute)",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_toml(text: &str) -> Result<Suite, SuiteError> {
        Suite::parse(text, true, "s.toml")
    }

    #[test]
    fn a_full_toml_suite_reads() {
        let s = parse_toml(
            r#"
            name = "smoke"
            threshold = 0.5
            system_prompt = "Be terse."
            [defaults]
            timeout_secs = 30
            max_turns = 4
            approval = "deny"
            [judge]
            model = "judge-model"
            [[cases]]
            id = "one"
            prompt = "hi"
            files = { "src/a.txt" = "alpha" }
            checks = [
              { type = "exact", value = "hi" },
              { type = "tool_called", tool = "bash", args = { command = "^ls" }, max = 2 },
              { type = "file", path = "src/a.txt", contains = "alp" },
            ]
            [[cases]]
            id = "two"
            turns = ["a", "b"]
            approval = "auto"
            timeout_secs = 5
            [[cases.checks]]
            type = "judge"
            criteria = "polite"
            "#,
        )
        .unwrap();
        assert_eq!(s.name, "smoke");
        assert_eq!(s.threshold, 0.5);
        assert_eq!(s.judge.model.as_deref(), Some("judge-model"));
        let one = &s.cases[0];
        assert_eq!(one.turns, vec!["hi"]);
        assert_eq!(one.timeout, Duration::from_secs(30));
        assert_eq!(one.max_turns, 4);
        assert_eq!(one.approval, Approval::Deny);
        assert_eq!(one.files[Path::new("src/a.txt")], "alpha");
        assert!(matches!(
            &one.checks[1],
            Check::ToolCalled { tool, min: 1, max: Some(2), .. } if tool == "bash"
        ));
        let two = &s.cases[1];
        assert_eq!(two.turns, vec!["a", "b"]);
        assert_eq!(two.approval, Approval::Auto);
        assert_eq!(two.timeout, Duration::from_secs(5));
        assert_eq!(two.checks[0].kind(), "judge");
    }

    #[test]
    fn json_suites_read_and_name_the_file_stem() {
        let s = Suite::parse(
            r#"{"cases": [{"id": "x", "prompt": "p", "checks": [{"type": "contains", "value": "p"}]}]}"#,
            false,
            "dir/my-suite.json",
        )
        .unwrap();
        assert_eq!(s.name, "my-suite");
        assert_eq!(s.threshold, 1.0);
        assert_eq!(s.cases[0].timeout, DEFAULT_TIMEOUT);
        assert_eq!(s.cases[0].max_turns, DEFAULT_MAX_TURNS);
    }

    fn error_of(text: &str) -> String {
        parse_toml(text).unwrap_err().to_string()
    }

    const CHECK: &str = r#"checks = [{ type = "contains", value = "x" }]"#;

    #[test]
    fn every_mistake_names_its_field() {
        let cases = [
            (
                format!("[[cases]]\nid = \"a\"\npromt = \"x\"\n{CHECK}"),
                "cases[0]: unknown field `promt`",
            ),
            (
                format!("[[cases]]\nid = \"a\"\n{CHECK}"),
                "cases[0].prompt: missing",
            ),
            (
                "[[cases]]\nid = \"a\"\nprompt = \"x\"\nchecks = [{ type = \"regex\", pattern = \"(\" }]"
                    .to_string(),
                "cases[0].checks[0].pattern:",
            ),
            (
                "[[cases]]\nid = \"a\"\nprompt = \"x\"\nchecks = [{ type = \"contains\" }]"
                    .to_string(),
                "cases[0].checks[0]: missing field `value`",
            ),
            (
                "[[cases]]\nid = \"a\"\nprompt = \"x\"\nchecks = [{ type = \"sounds_right\" }]"
                    .to_string(),
                "cases[0].checks[0]: unknown variant `sounds_right`",
            ),
            (
                "[[cases]]\nid = \"a\"\nprompt = \"x\"\nchecks = [{ value = \"x\" }]".to_string(),
                "cases[0].checks[0].type: missing",
            ),
            (
                format!("[[cases]]\nid = \"a\"\nprompt = \"x\"\nfiles = {{ \"../up\" = \"\" }}\n{CHECK}"),
                "cases[0].files.\"../up\": must be a relative path",
            ),
            (
                format!("threshold = 1.5\n[[cases]]\nid = \"a\"\nprompt = \"x\"\n{CHECK}"),
                "threshold: 1.5 is not a share",
            ),
            (
                format!("[defaults]\napproval = \"maybe\"\n[[cases]]\nid = \"a\"\nprompt = \"x\"\n{CHECK}"),
                "defaults: unknown variant `maybe`",
            ),
            (
                format!(
                    "[[cases]]\nid = \"a\"\nprompt = \"x\"\n{CHECK}\n[[cases]]\nid = \"a\"\nprompt = \"y\"\n{CHECK}"
                ),
                "cases[1].id: `a` is the id of an earlier case",
            ),
            (
                "[[cases]]\nid = \"a\"\nprompt = \"x\"\n".to_string(),
                "cases[0].checks: a case needs at least one check",
            ),
            (
                format!("[[cases]]\nid = \"a\"\nturns = [\"x\", \" \"]\n{CHECK}"),
                "cases[0].turns[1]: must not be empty",
            ),
            ("name = \"n\"\n".to_string(), "missing field `cases`"),
        ];
        for (text, expected) in cases {
            let err = error_of(&text);
            assert!(err.contains(expected), "{expected:?} not in {err:?}");
            assert!(err.starts_with("s.toml: "), "{err}");
        }
    }

    #[test]
    fn syntax_errors_say_the_format() {
        let err = parse_toml("cases = [").unwrap_err().to_string();
        assert!(err.contains("not valid TOML"), "{err}");
        let err = Suite::parse("{", false, "s.json").unwrap_err().to_string();
        assert!(err.contains("not valid JSON"), "{err}");
    }
}
