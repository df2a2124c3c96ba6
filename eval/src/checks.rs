//! Scoring a case's outcome with its checks: the text checks against the final reply, the
//! tool-call expectations against the calls the model made, file checks against the
//! workspace. `judge` checks need a model and are scored by [`crate::judge`].

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::suite::Check;

/// One tool call the model made during a case, with what it returned.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallRecord {
    pub name: String,
    /// The arguments as parsed JSON, or the raw text when they were not valid JSON.
    pub arguments: Value,
    /// The tool's result as the model saw it (`None`: no result, e.g. the case timed out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// How one check went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckResult {
    /// The check's `type`.
    pub kind: String,
    pub passed: bool,
    /// What was expected and what was found (or the judge's reason).
    pub detail: String,
}

impl CheckResult {
    pub fn new(kind: &str, passed: bool, detail: impl Into<String>) -> Self {
        Self {
            kind: kind.to_string(),
            passed,
            detail: detail.into(),
        }
    }
}

/// What a case produced, as the checks see it.
#[derive(Debug, Clone, Copy)]
pub struct Outcome<'a> {
    /// The final turn's visible reply.
    pub reply: &'a str,
    pub tool_calls: &'a [ToolCallRecord],
    /// The case's workspace directory.
    pub workspace: &'a Path,
}

/// Scores `check` against `outcome`; `None` for a `judge` check (scored elsewhere).
pub fn score(check: &Check, outcome: &Outcome<'_>) -> Option<CheckResult> {
    let kind = check.kind();
    let reply = outcome.reply;
    Some(match check {
        Check::Exact { value, trim } => {
            let (got, want) = if *trim {
                (reply.trim(), value.trim())
            } else {
                (reply, value.as_str())
            };
            let passed = got == want;
            CheckResult::new(
                kind,
                passed,
                if passed {
                    format!("reply is {want:?}")
                } else {
                    format!("expected {want:?}, got {}", excerpt(got))
                },
            )
        }
        Check::Contains { value, ignore_case } => {
            let found = contains(reply, value, *ignore_case);
            CheckResult::new(
                kind,
                found,
                if found {
                    format!("reply contains {value:?}")
                } else {
                    format!("{value:?} not in reply {}", excerpt(reply))
                },
            )
        }
        Check::NotContains { value, ignore_case } => {
            let found = contains(reply, value, *ignore_case);
            CheckResult::new(
                kind,
                !found,
                if found {
                    format!("reply contains {value:?}: {}", excerpt(reply))
                } else {
                    format!("{value:?} not in reply")
                },
            )
        }
        Check::Regex { pattern } => {
            let passed = pattern.is_match(reply);
            CheckResult::new(
                kind,
                passed,
                if passed {
                    format!("reply matches /{pattern}/")
                } else {
                    format!("/{pattern}/ does not match reply {}", excerpt(reply))
                },
            )
        }
        Check::ToolCalled {
            tool,
            args,
            min,
            max,
        } => {
            let named: Vec<&ToolCallRecord> = outcome
                .tool_calls
                .iter()
                .filter(|c| &c.name == tool)
                .collect();
            let matching: Vec<&&ToolCallRecord> = named
                .iter()
                .filter(|c| {
                    args.iter().all(|(name, re)| {
                        argument(&c.arguments, name).is_some_and(|text| re.is_match(&text))
                    })
                })
                .collect();
            let n = matching.len();
            let passed = n >= *min && max.is_none_or(|max| n <= max);
            let wanted = match max {
                Some(max) if *max == *min => format!("exactly {min}"),
                Some(max) => format!("{min} to {max}"),
                None => format!("at least {min}"),
            };
            let with = if args.is_empty() {
                String::new()
            } else {
                let list: Vec<String> = args.iter().map(|(k, re)| format!("{k}=~/{re}/")).collect();
                format!(" with {}", list.join(", "))
            };
            let seen: Vec<String> = named.iter().map(|c| c.arguments.to_string()).collect();
            CheckResult::new(
                kind,
                passed,
                format!(
                    "{tool}{with}: wanted {wanted} call(s), found {n}{}",
                    if passed || seen.is_empty() {
                        String::new()
                    } else {
                        format!(" (its calls: {})", seen.join("; "))
                    }
                ),
            )
        }
        Check::ToolNotCalled { tool } => {
            let n = outcome
                .tool_calls
                .iter()
                .filter(|c| &c.name == tool)
                .count();
            CheckResult::new(
                kind,
                n == 0,
                if n == 0 {
                    format!("{tool} was not called")
                } else {
                    format!("{tool} was called {n} time(s)")
                },
            )
        }
        Check::File {
            path,
            contains: wanted,
            regex,
        } => file_check(kind, &outcome.workspace.join(path), path, wanted, regex),
        Check::Judge { .. } => return None,
    })
}

fn file_check(
    kind: &str,
    full: &Path,
    path: &Path,
    wanted: &Option<String>,
    regex: &Option<regex::Regex>,
) -> CheckResult {
    let shown = path.display();
    let text = match std::fs::read(full) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return CheckResult::new(kind, false, format!("{shown} does not exist"));
        }
        Err(e) => return CheckResult::new(kind, false, format!("{shown}: cannot read: {e}")),
    };
    if let Some(wanted) = wanted
        && !text.contains(wanted.as_str())
    {
        return CheckResult::new(
            kind,
            false,
            format!("{wanted:?} not in {shown} {}", excerpt(&text)),
        );
    }
    if let Some(re) = regex
        && !re.is_match(&text)
    {
        return CheckResult::new(
            kind,
            false,
            format!("/{re}/ does not match {shown} {}", excerpt(&text)),
        );
    }
    CheckResult::new(kind, true, format!("{shown} as expected"))
}

fn contains(haystack: &str, needle: &str, ignore_case: bool) -> bool {
    if ignore_case {
        haystack.to_lowercase().contains(&needle.to_lowercase())
    } else {
        haystack.contains(needle)
    }
}

/// The value of argument `name` as text: strings as they are, anything else as JSON.
fn argument(arguments: &Value, name: &str) -> Option<String> {
    match arguments.get(name)? {
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// `text` quoted and cut to 120 characters for a detail line.
pub fn excerpt(text: &str) -> String {
    const MAX: usize = 120;
    let mut cut: String = text.chars().take(MAX).collect();
    if text.chars().count() > MAX {
        cut.push('…');
    }
    format!("{cut:?}")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use regex::Regex;
    use serde_json::json;

    use super::*;

    fn call(name: &str, arguments: Value) -> ToolCallRecord {
        ToolCallRecord {
            name: name.into(),
            arguments,
            output: None,
        }
    }

    fn run(check: Check, reply: &str, calls: &[ToolCallRecord]) -> CheckResult {
        score(
            &check,
            &Outcome {
                reply,
                tool_calls: calls,
                workspace: Path::new("/nonexistent"),
            },
        )
        .unwrap()
    }

    #[test]
    fn text_checks_pass_and_fail() {
        let exact = |value: &str, trim| Check::Exact {
            value: value.into(),
            trim,
        };
        assert!(run(exact("hi", true), " hi\n", &[]).passed);
        assert!(!run(exact("hi", false), " hi\n", &[]).passed);
        let failed = run(exact("hi", true), "hello", &[]);
        assert!(!failed.passed);
        assert!(failed.detail.contains("expected \"hi\", got \"hello\""));

        let contains = |value: &str, ignore_case| Check::Contains {
            value: value.into(),
            ignore_case,
        };
        assert!(run(contains("Paris", false), "It is Paris.", &[]).passed);
        assert!(!run(contains("paris", false), "It is Paris.", &[]).passed);
        assert!(run(contains("paris", true), "It is Paris.", &[]).passed);
        let not = Check::NotContains {
            value: "sorry".into(),
            ignore_case: true,
        };
        assert!(run(not.clone(), "Done.", &[]).passed);
        assert!(!run(not, "Sorry, no.", &[]).passed);

        let re = Check::Regex {
            pattern: Regex::new(r"^\d+$").unwrap(),
        };
        assert!(run(re.clone(), "42", &[]).passed);
        assert!(!run(re, "forty-two", &[]).passed);
    }

    #[test]
    fn tool_expectations_count_matching_calls() {
        let calls = [
            call("bash", json!({"command": "ls -la"})),
            call("bash", json!({"command": "cat a.txt"})),
            call("write_file", json!({"path": "a.txt", "n": 3})),
        ];
        let called = |tool: &str, args: &[(&str, &str)], min, max| Check::ToolCalled {
            tool: tool.into(),
            args: args
                .iter()
                .map(|(k, v)| (k.to_string(), Regex::new(v).unwrap()))
                .collect::<BTreeMap<_, _>>(),
            min,
            max,
        };
        assert!(run(called("bash", &[], 1, None), "", &calls).passed);
        assert!(run(called("bash", &[], 2, Some(2)), "", &calls).passed);
        assert!(!run(called("bash", &[], 3, None), "", &calls).passed);
        assert!(
            run(
                called("bash", &[("command", "^cat ")], 1, Some(1)),
                "",
                &calls
            )
            .passed
        );
        // Non-string arguments match as JSON text.
        assert!(run(called("write_file", &[("n", "^3$")], 1, None), "", &calls).passed);
        let miss = run(called("bash", &[("command", "^rm ")], 1, None), "", &calls);
        assert!(!miss.passed);
        assert!(miss.detail.contains("found 0"), "{}", miss.detail);
        assert!(miss.detail.contains("ls -la"), "{}", miss.detail);
        assert!(!run(called("read_file", &[], 1, None), "", &calls).passed);

        let not = |tool: &str| Check::ToolNotCalled { tool: tool.into() };
        assert!(run(not("read_file"), "", &calls).passed);
        let failed = run(not("bash"), "", &calls);
        assert!(!failed.passed);
        assert!(failed.detail.contains("called 2 time(s)"));
    }

    #[test]
    fn file_checks_read_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("out.txt"), "result: 42\n").unwrap();
        let check = |path: &str, contains: Option<&str>, re: Option<&str>| Check::File {
            path: path.into(),
            contains: contains.map(String::from),
            regex: re.map(|r| Regex::new(r).unwrap()),
        };
        let outcome = Outcome {
            reply: "",
            tool_calls: &[],
            workspace: dir.path(),
        };
        let ok = |c: Check| score(&c, &outcome).unwrap();
        assert!(ok(check("out.txt", None, None)).passed);
        assert!(ok(check("out.txt", Some("42"), Some(r"result: \d+"))).passed);
        assert!(!ok(check("out.txt", Some("43"), None)).passed);
        assert!(!ok(check("out.txt", None, Some("^x"))).passed);
        let missing = ok(check("gone.txt", None, None));
        assert!(!missing.passed);
        assert!(missing.detail.contains("does not exist"));
    }
}
