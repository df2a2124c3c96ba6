//! The environment a stdio server starts with: the node's, minus anything that looks like
//! a secret; the server's configured `env` is merged on top by the caller.

use std::collections::BTreeMap;

/// Name endings (upper-cased) that mark a variable as a secret.
const SECRET_SUFFIXES: &[&str] = &[
    "_KEY",
    "_SECRET",
    "_TOKEN",
    "_PASSWORD",
    "_PASS",
    "_PASSWD",
    "_CREDENTIALS",
    "_CREDENTIAL",
    "_API_KEY",
    "_PRIVATE_KEY",
    "_AUTH",
];
/// Whole names (upper-cased) that are secrets.
const SECRET_NAMES: &[&str] = &[
    "PASSWORD",
    "TOKEN",
    "SECRET",
    "API_KEY",
    "DATABASE_URL",
    "REDIS_URL",
    "PGPASSWORD",
];

/// Whether an environment variable name looks like a secret.
fn is_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAMES.contains(&upper.as_str())
        || SECRET_SUFFIXES.iter().any(|s| upper.ends_with(s))
        || upper.starts_with("TURNSTONE_")
}

/// The given environment without secrets (names ending `_KEY`, `_SECRET`, `_TOKEN`,
/// `_PASSWORD` …, and every `TURNSTONE_*` variable).
pub fn scrubbed_environment(
    vars: impl IntoIterator<Item = (String, String)>,
) -> BTreeMap<String, String> {
    vars.into_iter().filter(|(k, _)| !is_secret(k)).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn secrets_are_removed_and_the_rest_kept() {
        let env = scrubbed_environment(
            [
                ("PATH", "/usr/bin"),
                ("HOME", "/root"),
                ("OPENAI_API_KEY", "sk"),
                ("GITHUB_TOKEN", "ghp"),
                ("aws_secret", "x"),
                ("DB_PASSWORD", "pw"),
                ("TURNSTONE_AUTH_TOKEN", "t"),
                ("DATABASE_URL", "postgres://u:p@h/db"),
                ("LANG", "C.UTF-8"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(names, ["HOME", "LANG", "PATH"]);
    }
}
